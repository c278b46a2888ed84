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

"""Log one line per request: method, path, status and request id.

The method and URI are the client's: logged percent-encoded (a %0A in the
path would have written a line of the client's own making, an ESC a
terminal's control sequence) and bounded (a URI of 64 KiB, a line as
long).
"""

import string
from urllib import parse

from oslo_log import log as logging
from oslo_middleware import request_id

from trove_upgrade.api import util

LOG = logging.getLogger(__name__)


class RequestLog:

    def __init__(self, application):
        self.application = application

    def __call__(self, environ, start_response):
        def logging_start_response(status, headers, exc_info=None):
            LOG.info('%(request_id)s %(remote)s "%(method)s %(path)s" '
                     'status: %(status)s',
                     {'request_id': environ.get(request_id.ENV_REQUEST_ID),
                      'remote': environ.get('REMOTE_ADDR', '-'),
                      'method': quoted(environ.get('REQUEST_METHOD', '')),
                      'path': _request_uri(environ),
                      'status': status.split(None, 1)[0]})
            return start_response(status, headers, exc_info)

        return self.application(environ, logging_start_response)


# Printable ASCII but the space, which a request line cannot hold.
_KEPT = ''.join(c for c in string.printable if c not in string.whitespace)


def _quoted(text, safe):
    """``text``, a WSGI string (bytes as latin-1), percent-encoded."""
    return parse.quote(text, safe=safe, encoding='latin-1', errors='replace')


def quoted(text):
    """``text`` as sent (not decoded), printable, on one line, bounded."""
    return util.bounded(_quoted(text, _KEPT + ' '))


def _request_uri(environ):
    # The path is decoded: its % is quoted again; the query string is not.
    uri = _quoted(environ.get('SCRIPT_NAME', '') +
                  environ.get('PATH_INFO', ''), _KEPT.replace('%', ''))
    if environ.get('QUERY_STRING'):
        uri += '?' + _quoted(environ['QUERY_STRING'], _KEPT)
    return util.bounded(uri)
