"""``pip install trove-upgrade`` is the CLI plugin, without the server stack.

One real install, as an operator's workstation does it: a new virtualenv,
``pip install <this checkout> python-openstackclient`` (so through
pyproject.toml and pbr's build backend), then the ``openstack`` command.
It is the slowest test of the suite (minutes, mostly pip resolving
python-openstackclient), so there is only this one.
"""

import json
import os
import subprocess
import sys

import fixtures

from trove_upgrade.tests import base

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), '..', '..',
                                    '..', '..'))
# What the control plane and the agent need and an operator's
# workstation must not get: the extras of setup.cfg bring them.
SERVER_MODULES = ['alembic', 'keystonemiddleware', 'oslo_db',
                  'oslo_messaging', 'oslo_service', 'sqlalchemy']
PROBE = '''
import importlib.metadata, importlib.util, json, sys
for entry_point in importlib.metadata.entry_points(
        group='openstack.guest_upgrade.v1'):
    entry_point.load()
print(json.dumps({
    'commands': sorted(entry_point.name for entry_point in
                       importlib.metadata.entry_points(
                           group='openstack.guest_upgrade.v1')),
    'importable': sorted(name for name in %r
                         if importlib.util.find_spec(name) is not None),
}))
''' % (SERVER_MODULES,)


class TestCLIOnlyInstall(base.TestCase):

    def run_in(self, venv, argv, timeout=120):
        # No OS_* variable of the test run reaches the client.
        env = {name: value for name, value in os.environ.items()
               if not name.startswith('OS_')}
        argv = [os.path.join(venv, 'bin', argv[0])] + argv[1:]
        return subprocess.run(argv, capture_output=True, text=True, env=env,
                              timeout=timeout, check=False)

    def test_the_cli_works_without_the_server_stack(self):
        venv = self.useFixture(fixtures.TempDir()).join('venv')
        subprocess.run([sys.executable, '-m', 'venv', venv], check=True,
                       timeout=300)

        install = self.run_in(venv, ['python', '-m', 'pip', 'install', '-q',
                                     REPO, 'python-openstackclient'],
                              timeout=1800)
        self.assertEqual(0, install.returncode, install.stderr[-5000:])

        shown = self.run_in(venv, ['openstack', 'database', 'upgrade',
                                   'list', '--help'])
        self.assertEqual(0, shown.returncode, shown.stderr)
        self.assertIn('usage: openstack database upgrade list', shown.stdout)
        self.assertIn('--status', shown.stdout)
        probe = self.run_in(venv, ['python', '-c', PROBE])
        self.assertEqual(0, probe.returncode, probe.stderr)
        found = json.loads(probe.stdout)
        self.assertIn('database_upgrade_create', found['commands'])
        self.assertIn('database_rollout_create', found['commands'])
        self.assertEqual([], found['importable'])
