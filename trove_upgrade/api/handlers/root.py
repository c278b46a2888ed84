"""Versions documents: public, for API discovery."""

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
