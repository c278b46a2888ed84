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

"""The public documents: the versions, for API discovery, and health.

The health check is oslo.middleware's, answering 200 (or 503 when one of
``[healthcheck] backends`` says so: by default the database's,
``trove_upgrade.api.healthcheck``, or for example ``disable_by_file``
while an operator drains the node) to load balancers without a token.
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
