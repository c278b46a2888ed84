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

"""Log one line per request: method, path, status and request id."""

from oslo_log import log as logging
from oslo_middleware import request_id

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
                      'method': environ.get('REQUEST_METHOD'),
                      'path': _request_uri(environ),
                      'status': status.split(None, 1)[0]})
            return start_response(status, headers, exc_info)

        return self.application(environ, logging_start_response)


def _request_uri(environ):
    uri = environ.get('SCRIPT_NAME', '') + environ.get('PATH_INFO', '')
    if environ.get('QUERY_STRING'):
        uri += '?' + environ['QUERY_STRING']
    return uri
