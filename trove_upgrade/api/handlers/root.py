"""The public documents: the versions, for API discovery, and health.

The health check is oslo.middleware's, answering 200 (or 503 when a
``[healthcheck] backends`` says so, for example ``disable_by_file`` while
an operator drains the node) to load balancers without a token.
"""

from trove_upgrade.api import util

_VERSION = {'id': 'v1.0', 'status': 'CURRENT'}


def _version(req):
    return dict(_VERSION, links=[
        {'rel': 'self', 'href': req.application_url + '/v1.0/'}])


@util.wsgify
def versions(req):
    return util.json_response({'versions': [_version(req)]})


@util.wsgify
def version(req):
    return util.json_response({'version': _version(req)})


@util.wsgify
def healthcheck(req):
    return req.environ[util.HEALTHCHECK_KEY]
