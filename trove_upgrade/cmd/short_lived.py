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

"""How a command run from a shell ends when its user or its reader stops.

The commands an operator runs and waits for (trove-upgrade-manage, -status,
-package and -adopt) each wrap their ``main`` in :func:`command`:

* Ctrl-C (SIGINT, ``KeyboardInterrupt``) ended them with a Python
  traceback; they now print one line to stderr and exit 130 (128 + the
  signal's number), as a shell reports a command that SIGINT stopped.
* A reader that went away (``trove-upgrade-status upgrade check | head
  -1``) ended them with a ``BrokenPipeError`` traceback, or with Python's
  "Exception ignored" when the output was flushed at exit. They now stop
  quietly, as coreutils' commands do, and exit 141 (128 + SIGPIPE), the
  status a shell shows for those. SIGPIPE itself keeps Python's ignored
  disposition: its default action would also kill a command whose
  database or broker connection broke.

The long-running services are not wrapped: oslo.service stops them.
"""

import functools
import os
import signal
import sys

INTERRUPTED = 128 + signal.SIGINT
BROKEN_PIPE = 128 + signal.SIGPIPE


def _discard_stdout():
    """Send what is left for stdout to /dev/null.

    Python flushes stdout again at exit; into the closed pipe, that
    flush printed "Exception ignored ... BrokenPipeError" and exited 120.
    """
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        # No stdout file descriptor at all: nothing to flush at exit.
        pass


def command(prog):
    """Decorate ``main`` of the command ``prog`` (see the module's doc)."""
    def decorate(main):
        @functools.wraps(main)
        def run(*args, **kwargs):
            try:
                try:
                    return main(*args, **kwargs)
                finally:
                    # Here, not at exit, so that a closed pipe is seen.
                    if sys.stdout is not None:
                        sys.stdout.flush()
            except KeyboardInterrupt:
                try:
                    print('%s: interrupted' % prog, file=sys.stderr)
                except OSError:
                    pass
                return INTERRUPTED
            except BrokenPipeError:
                _discard_stdout()
                return BROKEN_PIPE
        return run
    return decorate
