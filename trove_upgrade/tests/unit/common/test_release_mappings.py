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

"""The release mapping stays the one true list of RPC versions."""

from trove_upgrade.agent import manager as agent_manager
from trove_upgrade.common import conductor_rpcapi as conductor_rpcapi
from trove_upgrade.common import exception
from trove_upgrade.common import release_mappings
from trove_upgrade.conductor import manager as conductor_manager
from trove_upgrade.services import agent_rpcapi
from trove_upgrade.tests import base


class TestReleaseMapping(base.TestCase):

    def test_master_matches_the_code(self):
        # Bumping an RPC_API_VERSION without the mapping (or the reverse)
        # would let a pinned fleet receive messages it does not know.
        self.assertEqual(
            {'agent': agent_rpcapi.AgentAPI.RPC_API_VERSION,
             'conductor': conductor_rpcapi.ConductorAPI.RPC_API_VERSION},
            release_mappings.RELEASE_MAPPING['master'])

    def test_conductor_client_and_server_agree(self):
        self.assertEqual(conductor_rpcapi.ConductorAPI.RPC_API_VERSION,
                         conductor_manager.ConductorManager.RPC_API_VERSION)
        self.assertEqual(
            conductor_rpcapi.ConductorAPI.RPC_API_VERSION,
            conductor_manager.ConductorManager.target.version)

    def test_agent_client_and_server_agree(self):
        self.assertEqual(agent_rpcapi.AgentAPI.RPC_API_VERSION,
                         agent_manager.AgentManager.RPC_API_VERSION)
        self.assertEqual(agent_rpcapi.AgentAPI.RPC_API_VERSION,
                         agent_manager.AgentManager.target.version)

    def test_every_release_names_every_service_with_a_version(self):
        for release, versions in release_mappings.RELEASE_MAPPING.items():
            self.assertEqual({'agent', 'conductor'}, set(versions), release)
            for version in versions.values():
                self.assertTrue(release_mappings.is_version(version),
                                (release, version))

    def test_releases_never_go_back(self):
        # A later release speaks at least what an earlier one spoke, so
        # pinning to an older release never asks for a newer version.
        releases = sorted(r for r in release_mappings.RELEASE_MAPPING
                          if r != 'master') + ['master']
        for service in ('agent', 'conductor'):
            versions = [release_mappings.version_key(
                release_mappings.RELEASE_MAPPING[r][service])
                for r in releases]
            self.assertEqual(sorted(versions), versions, service)


class TestResolveVersionCap(base.TestCase):

    def test_latest_is_no_cap(self):
        self.assertIsNone(
            release_mappings.resolve_version_cap('agent', 'latest'))

    def test_release_alias(self):
        self.assertEqual('1.0', release_mappings.resolve_version_cap(
            'conductor', '2026.2'))

    def test_explicit_versions(self):
        for value in ('1.0', '0.1', '0.9'):
            self.assertEqual(value, release_mappings.resolve_version_cap(
                'agent', value))

    def test_explicit_version_above_the_code_is_invalid(self):
        # An unknown release name looks like a version: it must not pass
        # as a cap that caps nothing.
        newest = release_mappings.RELEASE_MAPPING['master']['agent']
        major, minor = release_mappings.version_key(newest)
        for value in ('%d.%d' % (major, minor + 1), '%d.0' % (major + 1),
                      '2026.1'):
            e = self.assertRaises(exception.InvalidRPCVersionCapError,
                                  release_mappings.resolve_version_cap,
                                  'agent', value)
            self.assertIn('[upgrade_levels] agent = %s is above %s'
                          % (value, newest), str(e))
            self.assertIn('2026.2, master', str(e))

    def test_auto_asks_the_caller(self):
        self.assertEqual('1.7', release_mappings.resolve_version_cap(
            'agent', 'auto', auto=lambda: '1.7'))

    def test_auto_without_a_source_is_invalid(self):
        self.assertRaises(exception.InvalidRPCVersionCapError,
                          release_mappings.resolve_version_cap,
                          'conductor', 'auto')

    def test_invalid_values(self):
        for value in ('', '1', '1.', '.1', '1.0.0', 'v1.0', '01.0', '1.01',
                      ' 1.0', 'Latest', 'x.y'):
            e = self.assertRaises(exception.InvalidRPCVersionCapError,
                                  release_mappings.resolve_version_cap,
                                  'agent', value)
            self.assertIn('[upgrade_levels] agent = %s ' % value, str(e))
            self.assertEqual(400, e.code)

    def test_version_key_orders_numerically(self):
        self.assertLess(release_mappings.version_key('1.9'),
                        release_mappings.version_key('1.10'))
        self.assertLess(release_mappings.version_key('1.10'),
                        release_mappings.version_key('2.0'))
