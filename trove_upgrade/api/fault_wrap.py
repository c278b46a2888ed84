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

"""The last line of defence: no traceback ever reaches a client."""

from oslo_log import log as logging

from trove_upgrade.api import util
from trove_upgrade.db import exception as db_errors

LOG = logging.getLogger(__name__)


class FaultWrapper:
    """Turn an unexpected exception into a 500 JSON error and log it.

    A database that cannot be used right now is no bug of the request: it
    gets a 503, which clients retry, and one log line without a traceback.
    """

    def __init__(self, application):
        self.application = application

    def __call__(self, environ, start_response):
        try:
            return self.application(environ, start_response)
        except db_errors.UNAVAILABLE_ERRORS as e:
            LOG.error('The database failed serving %(method)s %(path)s: '
                      '%(error)s',
                      {'method': environ.get('REQUEST_METHOD'),
                       'path': environ.get('PATH_INFO'),
                       'error': db_errors.first_line(e)})
            response = util.error_response(
                503, 'The database is unavailable. Try again later; the '
                     'request id identifies the error in the service log.',
                environ)
            return response(environ, start_response)
        except Exception:
            LOG.exception('Unexpected error serving %(method)s %(path)s',
                          {'method': environ.get('REQUEST_METHOD'),
                           'path': environ.get('PATH_INFO')})
            response = util.error_response(
                500, 'An unexpected error occurred. The request id '
                     'identifies it in the service log.', environ)
            return response(environ, start_response)
