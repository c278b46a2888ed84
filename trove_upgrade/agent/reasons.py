#    Licensed under the Apache License, Version 2.0 (the "License"); you may
#    not use this file except in compliance with the License. You may obtain
#    a copy of the License at
#
#         http://www.apache.org/licenses/LICENSE-2.0
#
#    Unless required by applicable law or agreed to in writing, software
#    distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
#    WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
#    License for the specific language governing permissions and limitations
#    under the License.

"""The one line of another process's error that goes into a reason.

A remote exception from a guest agent carries the guest's traceback, with
its file paths; a child's output (pip, an import check, a health command,
systemctl) ends with a traceback or an error message after whatever it
printed before. A recorded reason is read by an operator
(``doc/source/admin/troubleshooting.rst``) and kept in the database: it
holds the last line, where Python and most tools say what went wrong, of
at most :data:`MAX_ERROR_LINE` characters. The whole text stays in the
other process's own log.
"""

from trove_upgrade.common import exception as package_exc

MAX_ERROR_LINE = 300
# oslo.messaging names the class it makes for a remote exception so.
_REMOTE_SUFFIX = '_Remote'


def error_line(text, limit=MAX_ERROR_LINE):
    """The last non-blank line of ``text``, its spaces collapsed, bounded."""
    lines = [' '.join(line.split()) for line in str(text).splitlines()]
    lines = [line for line in lines if line]
    return package_exc.bounded(lines[-1] if lines else '', limit)


def of_error(error, limit=MAX_ERROR_LINE):
    """``Type: last line`` of ``error``, a remote one's without traceback.

    oslo.messaging gives a remote error either as ``RemoteError`` (type,
    message and traceback apart: known here by its ``exc_type`` and
    ``value``, so that processes without oslo.messaging, such as the
    untrusted steps' child, use this too) or as a copy of a built-in
    exception whose first argument (or text) is the message followed by
    the remote traceback, whose last line names the type again.
    """
    exc_type = getattr(error, 'exc_type', None)
    if isinstance(exc_type, str) and hasattr(error, 'value'):
        return package_exc.bounded(
            '%s: %s' % (exc_type, error_line(error.value or '')), limit)
    name = type(error).__name__
    if name.endswith(_REMOTE_SUFFIX):
        name = name[:-len(_REMOTE_SUFFIX)]
    args = getattr(error, 'args', ())
    text = args[0] if args and isinstance(args[0], str) else str(error)
    line = error_line(text, limit)
    if line.startswith(name + ':') or not line:
        return line or name
    return package_exc.bounded('%s: %s' % (name, line), limit)
