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

"""What the API shows of registered packages."""

from trove_upgrade.api import util
from trove_upgrade.api.views import common


def package(req, tenant_id, package):
    return dict(
        {k: package[k] for k in (
            'id', 'name', 'version', 'strategy', 'location', 'state', 'size',
            'sha256', 'min_upgrade_from', 'signer_key_ids', 'project_id',
            'user_id', 'manifest_sha256', 'manifest_package')},
        manifest_created_at=util.isotime(package['manifest_created_at']),
        manifest_expires_at=util.isotime(package['manifest_expires_at']),
        created_at=util.isotime(package['created_at']),
        updated_at=util.isotime(package['updated_at']),
        links=common.links(req, tenant_id, 'packages', package['id']))
