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

"""Side-by-side installs with real virtualenvs, real uv and real pip."""

import os
import shutil
import signal
import subprocess
import sys
import zipfile

import fixtures
from oslo_log import log as logging

from tools.testbed import sample_guest
from trove_upgrade.agent import install
from trove_upgrade.agent import journal
from trove_upgrade.agent import venv_build
from trove_upgrade.agent import wheel_store
from trove_upgrade.tests import base


class TestInstallRoot(base.TestCase):

    def setUp(self):
        super().setUp()
        tmp = self.useFixture(fixtures.TempDir()).path
        self.root = os.path.join(tmp, 'root')
        self.wheels = os.path.join(tmp, 'wheels')
        self.state = os.path.join(tmp, 'state')
        os.makedirs(self.root)
        self.installs = install.InstallRoot(
            self.root, journal.InstallRootLock(self.root))
        self.health = sample_guest.health_command(self.state)

    def _wheel(self, version, behaviour='ok'):
        return sample_guest.build_wheel(
            os.path.join(self.wheels, version), version, behaviour)

    def test_install_switch_and_current_version(self):
        self.assertIsNone(self.installs.current_version())
        path = self.installs.install('1.0.0', [self._wheel('1.0.0')],
                                     health_command=self.health)
        self.assertTrue(os.path.exists(
            os.path.join(path, 'bin', 'sample-guest-agent')))
        self.assertTrue(self.installs.is_installed('1.0.0'))
        self.assertEqual((self.health, 30.0),
                         self.installs.health_check('1.0.0'))
        self.installs.switch('1.0.0')
        self.assertEqual('1.0.0', self.installs.current_version())
        self.assertEqual('versions/1.0.0',
                         os.readlink(self.installs.current_link))
        self.assertEqual([], [n for n in os.listdir(self.root)
                              if n.startswith('current.tmp')])

    def test_a_health_file_nested_too_deeply_is_no_health_check(self):
        # The RecursionError escaped to the agent's upgrade.
        os.makedirs(self.installs.path('1.0.0'))
        with open(os.path.join(self.installs.path('1.0.0'),
                               install.HEALTH_FILE), 'w') as f:
            f.write('[' * 60000)
        self.assertEqual((None, None), self.installs.health_check('1.0.0'))

    def test_failed_preflight_leaves_nothing(self):
        e = self.assertRaises(
            install.InstallError, self.installs.install, '2.0.0',
            [self._wheel('2.0.0', 'broken')], health_command=self.health)
        self.assertIn('preflight', str(e))
        self.assertIn('broken install', str(e))
        self.assertFalse(os.path.exists(self.installs.path('2.0.0')))

    def test_guest_agent_entry_point_is_checked(self):
        path = self.installs.install('1.0.0', [self._wheel('1.0.0')],
                                     console_script='sample-guest-agent')
        self.assertTrue(self.installs.is_installed('1.0.0'))
        self.assertTrue(os.path.exists(path))
        e = self.assertRaises(install.InstallError, self.installs.install,
                              '2.0.0', [self._wheel('2.0.0')],
                              console_script='trove-guestagent')
        self.assertIn('no console script trove-guestagent', str(e))
        self.assertFalse(os.path.exists(self.installs.path('2.0.0')))

    def test_unreadable_entry_points_are_an_install_error(self):
        # A configparser error once, which the pipeline could only
        # record as an internal error.
        bad = os.path.join(self.root, 'bad-1.0-py3-none-any.whl')
        with zipfile.ZipFile(bad, 'w') as zf:
            zf.writestr('bad-1.0.dist-info/entry_points.txt',
                        '[console_scripts]\na = b:c\na = d:e\n')
        e = self.assertRaises(install.InstallError,
                              self.installs._check_entry_point,
                              self.root, [bad], 'a')
        self.assertIn('entry points of wheel bad-1.0', str(e))

    def test_pip_failure_leaves_nothing(self):
        bogus = os.path.join(self.wheels, 'bogus-1.0-py3-none-any.whl')
        os.makedirs(self.wheels, exist_ok=True)
        with open(bogus, 'wb') as f:
            f.write(b'not a zip')
        e = self.assertRaises(install.InstallError, self.installs.install,
                              '2.0.0', [bogus])
        self.assertIn('pip install failed', str(e))
        self.assertFalse(os.path.exists(self.installs.path('2.0.0')))

    def test_only_wheels_are_installed(self):
        e = self.assertRaises(install.InstallError, self.installs.install,
                              '2.0.0', ['/etc/passwd'])
        self.assertIn('not a wheel', str(e))
        e = self.assertRaises(install.InstallError, self.installs.install,
                              '2.0.0', [])
        self.assertIn('no wheels', str(e))

    def test_bad_version_names_are_refused(self):
        for bad in ('../x', '', '.hidden', 'a/b', 'x' * 65, None):
            self.assertRaises(install.InstallError, self.installs.path, bad)

    def test_running_install_is_not_reinstalled(self):
        self.installs.install('1.0.0', [self._wheel('1.0.0')])
        self.installs.switch('1.0.0')
        e = self.assertRaises(install.InstallError, self.installs.install,
                              '1.0.0', [self._wheel('1.0.0')])
        self.assertIn('running install', str(e))

    def test_switch_refuses_an_incomplete_install(self):
        os.makedirs(self.installs.path('3.0.0'))
        e = self.assertRaises(install.InstallError, self.installs.switch,
                              '3.0.0')
        self.assertIn('not completely installed', str(e))
        self.assertIsNone(self.installs.current_version())

    def test_switch_replaces_the_link_a_killed_switch_left(self):
        self.installs.install('1.0.0', [self._wheel('1.0.0')])
        os.symlink('versions/0.9.0', self.installs.current_link + '.tmp')
        self.installs.switch('1.0.0')
        self.assertEqual('1.0.0', self.installs.current_version())
        self.assertEqual([], [n for n in os.listdir(self.root)
                              if n.startswith('current.tmp')])

    def test_remove_incomplete_kills_what_still_runs_in_it(self):
        # A killed agent's pip, say: it would write on into the directory.
        half = self.installs.path('2.0.0')
        os.makedirs(os.path.join(half, 'lib'))
        writers = [subprocess.Popen(['sleep', '60'], cwd=cwd)
                   for cwd in (half, os.path.join(half, 'lib'))]
        elsewhere = subprocess.Popen(['sleep', '60'], cwd=self.root)
        for proc in writers + [elsewhere]:
            self.addCleanup(proc.wait)
            self.addCleanup(proc.kill)
        self.installs.remove_incomplete()
        for proc in writers:
            self.assertEqual(-signal.SIGKILL, proc.wait(10))
        self.assertIsNone(elsewhere.poll())
        self.assertEqual([], os.listdir(self.installs.versions_dir))

    def test_remove_incomplete_keeps_complete_installs(self):
        self.installs.install('1.0.0', [self._wheel('1.0.0')])
        os.makedirs(self.installs.path('2.0.0'))
        self.installs.remove_incomplete()
        self.assertEqual(['1.0.0'], os.listdir(self.installs.versions_dir))

    def test_prune_keeps_current_and_last_known_good(self):
        for v in ('1.0.0', '2.0.0', '3.0.0', '4.0.0'):
            self.installs.install(v, [self._wheel(v)])
        self.installs.switch('4.0.0')
        removed = self.installs.prune(2, protect=['1.0.0'])
        self.assertEqual(['2.0.0', '3.0.0'], removed)
        self.assertEqual(['1.0.0', '4.0.0'],
                         sorted(self.installs.installed_versions()))

    def test_sample_guest_refuses_an_unknown_behaviour(self):
        e = self.assertRaises(ValueError, sample_guest.build_wheel,
                              self.wheels, '1.0.0', 'flaky')
        self.assertIn("unknown behaviour 'flaky'", str(e))

    def test_top_level_modules(self):
        self.assertEqual([sample_guest.DIST], install.top_level_modules(
            [self._wheel('1.0.0')]))

    def test_endless_health_output_times_out(self):
        reason = install.run_health_command(
            '%s -c "while True: print(\'y\' * 4096)"' % sys.executable,
            self.root, install.RUNNING, 1)
        self.assertEqual('%s after 1.0s' % install.HEALTH_TIMED_OUT, reason)

    def test_health_failure_quotes_the_end_of_its_output(self):
        reason = install.run_health_command(
            '%s -c "import sys; print(\'x\' * (64 << 20), flush=True); '
            'sys.exit(\'the real reason\x1b[0m\')"' % sys.executable,
            self.root, install.RUNNING, 60)
        # Its last line: 64 MiB of output before it are not a reason.
        self.assertEqual('health command exited with 1: the real reason?[0m',
                         reason)

    def _module_file(self, version, name='__init__.py'):
        top, = venv_build.site_packages(self.installs.path(version))
        return os.path.join(top, sample_guest.DIST, name)

    def _compiled(self, version):
        cache = os.path.dirname(self._module_file(version, '__pycache__/x'))
        return [os.path.join(cache, n) for n in os.listdir(cache)
                if n.startswith('__init__.') and n.endswith('.pyc')]

    def test_uv_builds_from_its_cache_with_byte_code(self):
        self.assertIsNotNone(self.installs.uv_program)
        wheel = self._wheel('1.0.0')
        dest = self.installs.path('1.0.0')
        self.assertEqual('uv', self.installs.build(dest, [wheel]))
        # Hard-linked from uv's cache, outside the install; compiled.
        self.assertEqual(2, os.stat(self._module_file('1.0.0')).st_nlink)
        self.assertTrue(os.path.isdir(self.installs.uv_cache))
        self.assertEqual(1, len(self._compiled('1.0.0')))

    def test_an_unchanged_file_takes_the_older_install_s_byte_code(self):
        wheel = self._wheel('1.0.0')
        self.installs.install('1.0.0', [wheel])
        # The same wheel verified again, for another upgrade: a new file
        # in another directory.
        again = os.path.join(self.wheels, 'again', os.path.basename(wheel))
        os.makedirs(os.path.dirname(again))
        shutil.copyfile(wheel, again)
        self.installs.install('1.0.0-copy', [again])
        old, = self._compiled('1.0.0')
        new, = self._compiled('1.0.0-copy')
        self.assertTrue(os.path.samefile(old, new))
        self.assertTrue(os.path.samefile(self._module_file('1.0.0'),
                                         self._module_file('1.0.0-copy')))
        # A changed source is compiled anew.
        self.installs.install('2.0.0', [self._wheel('2.0.0')])
        changed, = self._compiled('2.0.0')
        self.assertFalse(os.path.samefile(old, changed))
        self.assertEqual(1, os.stat(changed).st_nlink)

    def test_removing_an_install_or_the_cache_leaves_the_others_whole(self):
        wheel = self._wheel('1.0.0')
        self.installs.install('1.0.0', [wheel])
        self.installs.install('1.0.1', [wheel])
        install.remove_tree(self.installs.path('1.0.0'))
        self.installs.clear_uv_cache()
        self.assertFalse(os.path.exists(self.installs.uv_cache))
        self._check_imports('1.0.1')

    def _check_imports(self, version):
        subprocess.run([os.path.join(self.installs.path(version), 'bin',
                                     'python'), '-I', '-c',
                        'import %s' % sample_guest.DIST],
                       check=True, timeout=60)

    def test_pip_builds_where_uv_is_not_installed(self):
        installs = install.InstallRoot(self.root, self.installs.lock,
                                       uv_program=None)
        dest = installs.path('1.0.0')
        self.assertEqual('pip', installs.build(dest, [self._wheel('1.0.0')]))
        self.assertFalse(os.path.exists(installs.uv_cache))
        self.assertEqual(1, os.stat(self._module_file('1.0.0')).st_nlink)
        self.assertEqual(1, len(self._compiled('1.0.0')))

    def test_pip_builds_anew_where_uv_refuses(self):
        logs = self.useFixture(fixtures.FakeLogger(level=logging.WARNING))
        refusing = os.path.join(self.root, 'uv')
        with open(refusing, 'w') as f:
            f.write('#!/bin/sh\necho "uv: no, not today" >&2\n'
                    'touch half-written\nexit 2\n')
        os.chmod(refusing, 0o755)
        installs = install.InstallRoot(self.root, self.installs.lock,
                                       uv_program=refusing)
        path = installs.install('1.0.0', [self._wheel('1.0.0')],
                                console_script='sample-guest-agent')
        self.assertTrue(installs.is_installed('1.0.0'))
        self.assertFalse(os.path.exists(os.path.join(path,
                                                     'half-written')))
        self.assertIn('building it with pip', logs.output)
        self.assertIn('no, not today', logs.output)

    def test_a_wheel_both_refuse_names_both_reasons(self):
        bogus = os.path.join(self.wheels, 'bogus-1.0-py3-none-any.whl')
        os.makedirs(self.wheels, exist_ok=True)
        with open(bogus, 'wb') as f:
            f.write(b'not a zip')
        e = self.assertRaises(install.InstallError, self.installs.install,
                              '2.0.0', [bogus])
        self.assertIn('pip install failed', str(e))
        self.assertIn('uv before it: uv pip install failed', str(e))
        self.assertFalse(os.path.exists(self.installs.path('2.0.0')))

    def test_the_agent_s_uv_variables_do_not_reach_uv(self):
        # Any UV_* of the agent's environment could make uv install from
        # elsewhere or otherwise; this one would bypass the cache.
        self.useFixture(fixtures.EnvironmentVariable('UV_NO_CACHE', '1'))
        self.assertEqual('uv', self.installs.build(
            self.installs.path('1.0.0'), [self._wheel('1.0.0')]))
        self.assertEqual(2, os.stat(self._module_file('1.0.0')).st_nlink)

    def test_an_interrupted_build_empties_uv_s_cache(self):
        self.installs.install('1.0.0', [self._wheel('1.0.0')])
        self.assertTrue(os.path.isdir(self.installs.uv_cache))
        os.makedirs(self.installs.path('2.0.0'))
        self.installs.remove_incomplete()
        self.assertFalse(os.path.exists(self.installs.uv_cache))
        # The kept wheels stay: each is hashed again before it is used.
        self.assertEqual(1, len(self.installs.wheel_store.held()))
        self._check_imports('1.0.0')

    def test_prune_bounds_what_only_uv_s_cache_holds(self):
        self.useFixture(fixtures.MonkeyPatch(
            'trove_upgrade.agent.install.UV_CACHE_SPARE', 1 << 20))
        for v in ('1.0.0', '2.0.0', '3.0.0'):
            wheel = sample_guest.build_wheel(
                os.path.join(self.wheels, v), v, padding=2 << 20)
            self.installs.install(v, [wheel])
        self.installs.switch('3.0.0')
        # Every unpacked file of the cache is linked by an install.
        self.assertEqual([], self.installs.prune(3, protect=[]))
        self.assertTrue(os.path.isdir(self.installs.uv_cache))
        self.assertEqual(3, len(self.installs.wheel_store.held()))
        # 1.0.0's 2 MiB, linked by none after it went, empty it; its
        # wheel goes with it, the others' stay.
        self.assertEqual(['1.0.0'], self.installs.prune(2, protect=[]))
        self.assertFalse(os.path.exists(self.installs.uv_cache))
        self.assertEqual(
            sorted(wheel_store.read_record(self.installs.path('2.0.0'))
                   + wheel_store.read_record(self.installs.path('3.0.0'))),
            self.installs.wheel_store.held())
        self._check_imports('2.0.0')

    def test_resolve_command(self):
        self.assertEqual(['/i/bin/x', '--a', 'b c'],
                         install.resolve_command('bin/x --a "b c"', '/i'))
        self.assertEqual(['/usr/bin/env', 'x'],
                         install.resolve_command('/usr/bin/env x', '/i'))
        self.assertEqual(['true'], install.resolve_command('true', '/i'))
        self.assertRaises(install.InstallError, install.resolve_command,
                          '  ', '/i')
