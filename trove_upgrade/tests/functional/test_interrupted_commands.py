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

"""The operator's commands, run for real, stopped by Ctrl-C or their reader.

Ctrl-C ended them with a KeyboardInterrupt traceback and a closed stdout
(``| head -1``) with a BrokenPipeError one, or with "cannot read its
configuration: [Errno 32] Broken pipe". Now Ctrl-C is one line and exit
status 130, and a closed stdout a quiet exit with 141, as a shell reports
coreutils' commands killed by SIGPIPE (see trove_upgrade.cmd.short_lived).
The timeouts detect hangs; they are not timing assertions.
"""

import os
import signal
import socket
import subprocess
import time

from tools.testbed import conffile
from trove_upgrade.agent import adopt
from trove_upgrade.agent import install
from trove_upgrade.agent import pause_hook
from trove_upgrade.tests.fixtures import trove_venv
from trove_upgrade.tests.functional import commands
from trove_upgrade.tests.functional import rabbit
from trove_upgrade.tests.functional import servers

BIN = commands.BIN
TIMEOUT = commands.TIMEOUT


class CommandTestCase(commands.CommandTestCase):

    def start(self, command, *args, env=None, **kwargs):
        """``command`` running, killed at the end if the test left it."""
        kwargs.setdefault('stdout', subprocess.PIPE)
        proc = subprocess.Popen(
            [os.path.join(BIN, command)] + list(args),
            stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env,
            **kwargs)
        self.addCleanup(self._reap, proc)
        return proc

    @staticmethod
    def _reap(proc):
        if proc.poll() is None:
            proc.kill()
        proc.communicate()

    def agent_config(self):
        config = self.path('agent.conf')
        conffile.write_conf(config, {'agent': {
            'install_root': self.path('root'),
            'guest_program_link': self.path('guest-agent')}})
        return config

    def database_config(self, url):
        """A configuration with ``url`` and an exchange of the test's own.

        ``trove-upgrade-status`` casts its probe to the broker: with no
        transport configured, to the shared one's default exchange, which
        stayed behind.
        """
        config = self.path('db.conf')
        options = self.useFixture(rabbit.RabbitMQ()).options
        conffile.write_conf(config, {'DEFAULT': options['DEFAULT'],
                                     'database': {'connection': url}})
        return config


class TestCtrlC(CommandTestCase):

    def assertInterrupted(self, command, proc):
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=TIMEOUT)
        # The pause hook's own line goes first.
        lines = [line for line in err.decode().splitlines()
                 if not line.startswith('Test hook: paused at')]
        self.assertEqual((130, '', ['%s: interrupted' % command]),
                         (proc.returncode, out.decode(), lines))

    def test_while_the_database_does_not_answer(self):
        # The database: a loopback socket that accepts and never answers,
        # so the command waits for the server's greeting.
        listener = socket.socket()
        self.addCleanup(listener.close)
        listener.bind((servers.LOOPBACK, 0))
        listener.listen(4)
        listener.settimeout(TIMEOUT)
        config = self.database_config(
            'mysql+pymysql://u@%s:%d/d' % listener.getsockname())
        for command, *args in (('trove-upgrade-manage', 'db', 'version'),
                               ('trove-upgrade-status', 'upgrade', 'check')):
            proc = self.start(command, '--config-file', config, *args)
            conn, _ = listener.accept()
            self.addCleanup(conn.close)
            self.assertInterrupted(command, proc)

    def test_adoption_stopped_before_its_commit_is_undone(self):
        venv = self.path('venv')
        trove_venv.make(venv)
        env = dict(os.environ)
        env[pause_hook.ENV] = adopt.CHECKPOINT_PREFIX + adopt.COMMIT
        proc = self.start('trove-upgrade-adopt', '--config-file',
                          self.agent_config(), '--venv', venv, env=env)
        marker = self.path('root', pause_hook.MARKER_PREFIX + env[
            pause_hook.ENV])
        deadline = time.monotonic() + TIMEOUT
        while not os.path.exists(marker):
            self.assertIsNone(proc.poll(), 'adoption ended early')
            self.assertLess(time.monotonic(), deadline, 'not paused')
            time.sleep(0.05)
        self.assertInterrupted('trove-upgrade-adopt', proc)
        # Every step was undone, as after a failed one.
        self.assertFalse(os.path.lexists(self.path('root',
                                                   install.CURRENT_LINK)))
        self.assertFalse(os.path.exists(self.path('root', adopt.UNDO_LOG)))


class TestClosedStdout(CommandTestCase):

    def assertQuiet(self, command, *args, env=None):
        """``command`` writing to a pipe nobody reads exits 141, silent."""
        read_end, write_end = os.pipe()
        os.close(read_end)
        try:
            proc = self.start(command, *args, env=env, stdout=write_end)
        finally:
            os.close(write_end)
        _, err = proc.communicate(timeout=TIMEOUT)
        self.assertEqual((141, ''), (proc.returncode, err.decode()),
                         command)

    def test_every_command_that_prints(self):
        config = self.database_config(
            'sqlite:///' + self.path('test.sqlite'))
        subprocess.run([os.path.join(BIN, 'trove-upgrade-manage'),
                        '--config-file', config, 'db', 'sync'],
                       check=True, capture_output=True, timeout=TIMEOUT)
        self.assertQuiet('trove-upgrade-manage', '--config-file', config,
                         'db', 'version')
        self.assertQuiet('trove-upgrade-status', '--config-file', config,
                         'upgrade', 'check')
        self.assertQuiet('trove-upgrade-package', 'keygen', '--signing-key',
                         self.path('sk'), '--encryption-key',
                         self.path('ek'))
        venv = self.path('venv')
        trove_venv.make(venv)
        self.assertQuiet('trove-upgrade-adopt', '--config-file',
                         self.agent_config(), '--venv', venv)
