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

"""The agent refuses to start with a configuration that cannot work, and
keeps heartbeating through a conductor that is away."""

import errno
import os
import subprocess
import sys
from unittest import mock

import fixtures
import oslo_messaging as messaging

from trove_upgrade.agent import adopt
from trove_upgrade.agent import service
from trove_upgrade.common import exception
from trove_upgrade.tests import base

AGENT = os.path.join(os.path.dirname(sys.executable), 'trove-upgrade-agent')


class TestAgentStart(base.TestCase):

    def setUp(self):
        super().setUp()
        self.tmp = self.useFixture(fixtures.TempDir()).path

    def test_instance_id_and_guest_command_are_required(self):
        e = self.assertRaises(service.AgentConfigError, service.check_conf,
                              self.conf)
        self.assertIn('instance_id and guest_command must be set', str(e))

    def test_automatic_updates_need_keys(self):
        self.flags(group='agent', instance_id='i', guest_command='bin/g',
                   guest_automatic_updates=True)
        e = self.assertRaises(service.AgentConfigError, service.check_conf,
                              self.conf)
        self.assertIn('needs trusted_key_files and decryption_key_files',
                      str(e))

    def test_labels_the_conductor_refuses_stop_the_start(self):
        # Once accepted: then every registration and heartbeat was
        # refused by the conductor, one warning an interval.
        for labels, reason in (
                ({'k%d' % i: 'v' for i in range(65)}, '65 labels'),
                ({'k': 'v' * 256}, "label 'k': keys have 1 to 255"),
                ({'k' * 256: 'v'}, "label 'kkkk"),
                ({'k': 'a\x00b'}, "label 'k' holds a NUL")):
            self.flags(group='agent', instance_id='i', guest_command='bin/g',
                       labels=labels)
            e = self.assertRaises(service.AgentConfigError,
                                  service.check_conf, self.conf)
            self.assertIn('[agent] labels: %s' % reason, str(e))
        self.flags(group='agent', labels={'k%d' % i: 'v' * 255
                                          for i in range(64)})
        service.check_conf(self.conf)

    def test_no_verifier_without_keys(self):
        self.assertIsNone(service.build_verifier(self.conf))

    def test_one_agent_per_install_root(self):
        fd = service.AgentService._own_install_root(self.tmp)
        self.addCleanup(os.close, fd)
        e = self.assertRaises(service.AgentConfigError,
                              service.AgentService._own_install_root,
                              self.tmp, wait=0.2)
        self.assertIn('another trove-upgrade-agent still runs', str(e))

    def _run(self, **agent):
        path = os.path.join(self.tmp, 'agent.conf')
        agent.setdefault('instance_id',
                         '2b7f9a4e-8c1d-4e3f-9a0b-1c2d3e4f5a6b')
        agent.setdefault('guest_command', 'bin/guest')
        agent.setdefault('require_sealed', 'false')
        with open(path, 'w') as f:
            f.write('[DEFAULT]\nstate_path = %s\n[agent]\n' % self.tmp)
            for key, value in agent.items():
                f.write('%s = %s\n' % (key, value))
        return subprocess.run([AGENT, '--config-file', path],
                              stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=60)

    def test_missing_key_file_stops_the_agent_with_the_reason(self):
        proc = self._run(trusted_key_files='/nonexistent/release.pub')
        self.assertEqual(2, proc.returncode)
        self.assertIn(b'cannot start: cannot read key file '
                      b'/nonexistent/release.pub', proc.stdout)

    def test_unknown_guest_state_provider_stops_the_agent(self):
        proc = self._run(guest_state_provider='bogus')
        self.assertEqual(2, proc.returncode)
        self.assertIn(b"unknown guest state provider 'bogus'", proc.stdout)

    def test_corrupt_journal_stops_the_agent(self):
        root = os.path.join(self.tmp, 'agent')
        os.makedirs(root)
        with open(os.path.join(root, 'journal.json'), 'w') as f:
            f.write('{not json')
        proc = self._run(install_root=root)
        self.assertEqual(2, proc.returncode)
        self.assertIn(b'cannot read the agent journal', proc.stdout)

    def test_interrupted_adoption_stops_the_agent(self):
        # It ran on the half-adopted root, whose current and journal the
        # next adoption's undo could take back from under it.
        root = os.path.join(self.tmp, 'agent')
        os.makedirs(root)
        with open(os.path.join(root, adopt.UNDO_LOG), 'w') as f:
            f.write('{"format": 1, "entries": []}')
        proc = self._run(install_root=root)
        self.assertEqual(2, proc.returncode)
        self.assertIn(b'an adoption of install root %s was interrupted; run '
                      b'trove-upgrade-adopt' % root.encode(), proc.stdout)
        self.assertNotIn(b'Traceback', proc.stdout)


class TestHeartbeat(base.TestCase):
    """A conductor down or refusing: one warning, not a traceback."""

    def setUp(self):
        super().setUp()
        self.log = self.useFixture(fixtures.FakeLogger(level='WARNING'))
        self.conductor = mock.Mock()
        self.agent = mock.Mock(registered=False, conf=self.conf,
                               conductor_api=self.conductor)
        self.agent._agent_info.return_value = {'instance_id': 'i'}

    def test_registration_refused_or_unreachable(self):
        for error in (messaging.MessageUndeliverable(None, 'x', 'k', {}),
                      messaging.MessagingTimeout('no answer'),
                      exception.InvalidInputError(
                          reason='host must be a string')):
            self.conductor.register_agent.side_effect = error
            service.AgentService.heartbeat(self.agent)
            self.assertFalse(self.agent.registered)
        lines = self.log.output.splitlines()
        self.assertEqual(3, len(lines), self.log.output)
        self.assertIn('MessageUndeliverable: no conductor listens on its '
                      'topic', lines[0])
        self.assertIn('The registration with the conductor failed; the next '
                      'one is in 30.0 s: MessagingTimeout: no answer',
                      lines[1])
        self.assertNotIn('Traceback', self.log.output)

    def test_heartbeat_after_registration(self):
        service.AgentService.heartbeat(self.agent)
        self.assertTrue(self.agent.registered)
        self.conductor.heartbeat.side_effect = messaging.MessagingTimeout('x')
        service.AgentService.heartbeat(self.agent)
        self.assertIn('The heartbeat with the conductor failed',
                      self.log.output)


class TestOutboxTimer(base.TestCase):
    """A journal the outbox cannot write: one warning, not a traceback."""

    def test_full_disk_is_one_line_per_try(self):
        log = self.useFixture(fixtures.FakeLogger(level='WARNING'))
        agent = mock.Mock(conf=self.conf)
        agent.outbox.flush.side_effect = OSError(
            errno.ENOSPC, 'No space left on device')
        service.AgentService._flush_outbox(agent)
        service.AgentService._flush_outbox(agent)
        lines = log.output.splitlines()
        self.assertEqual(2, len(lines), log.output)
        self.assertIn('The outbox could not record what it sent, the '
                      'journal cannot be written; the next try is in 1.0 s: '
                      '[Errno 28] No space left on device', lines[0])
