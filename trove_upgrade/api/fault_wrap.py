"""The last line of defence: no traceback ever reaches a client."""

from oslo_log import log as logging

from trove_upgrade.api import util

LOG = logging.getLogger(__name__)


class FaultWrapper:
    """Turn an unexpected exception into a 500 JSON error and log it."""

    def __init__(self, application):
        self.application = application

    def __call__(self, environ, start_response):
        try:
            return self.application(environ, start_response)
        except Exception:
            LOG.exception('Unexpected error serving %(method)s %(path)s',
                          {'method': environ.get('REQUEST_METHOD'),
                           'path': environ.get('PATH_INFO')})
            response = util.error_response(
                500, 'An unexpected error occurred. The request id '
                     'identifies it in the service log.', environ)
            return response(environ, start_response)
