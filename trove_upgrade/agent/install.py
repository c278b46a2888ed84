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

"""Side-by-side installs of the guest agent and the ``current`` switch.

Layout under the install root::

    versions/<version>/      one virtualenv per installed version
    versions/<version>/.trove-upgrade-installed   written once it checked out
    current -> versions/<version>

A version is built in a fresh virtualenv at its final path from the
package's own wheels only (:mod:`trove_upgrade.agent.venv_build`: uv,
pip where uv refuses), and checked before anything points at it. The
wheels it was built from are kept, named by their SHA-256
(:mod:`trove_upgrade.agent.wheel_store`), for uv and for the next upgrade,
which fetches only the wheels it does not hold; pruning an old version
drops the wheels no remaining install lists. uv's cache (``uv-cache``)
files that no install links any more are dead weight: past
``UV_CACHE_SPARE`` bytes of them it is emptied (the next build unpacks and
compiles everything), and so it is after an interrupted build.

A directory without the marker is a half-built install from an interrupted
run and is removed, never used. The programs that build and check it run in
it (their working directory): a ``kill -9`` of the agent leaves them
running (uv, and the interpreters compiling byte code), and the next start
kills them before it removes the directory they would go on writing into.
A version may also be a symlink to
a virtualenv installed by other means (an adopted guest image's
``/opt/guest-agent-venv``, see ``agent/adopt.py``): removing it removes the
link only. ``current`` is replaced atomically: a new symlink is made under
a temporary name and renamed over it, so a crash leaves the old link or the
new one.
"""

import json
import os
import re
import shlex
import shutil
import sys
import zipfile

from oslo_log import log as logging

from trove_upgrade.agent import child_process
from trove_upgrade.agent import venv_build
from trove_upgrade.agent import wheel_store
from trove_upgrade.common import exception as package_exc
from trove_upgrade.package_format import wheels as wheels_mod
from trove_upgrade.package_format import writeback

LOG = logging.getLogger(__name__)

VERSIONS_DIR = 'versions'
CURRENT_LINK = 'current'
MARKER = '.trove-upgrade-installed'
HEALTH_FILE = '.trove-upgrade-health-check'
PHASE_ENV = 'TROVE_UPGRADE_PHASE'
HEALTH_TIMED_OUT = 'health command timed out'
PREFLIGHT = 'preflight'
UV_CACHE = 'uv-cache'
UV_CACHE_SPARE = 256 * 1024 * 1024
RUNNING = 'running'

_VERSION_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$')


InstallError = venv_build.InstallError


def remove_tree(path):
    """Remove an install; an adopted one (a symlink) loses its link only."""
    if os.path.islink(path):
        os.unlink(path)
    else:
        shutil.rmtree(path, ignore_errors=True)


def check_version_name(version):
    """Refuse a version that cannot safely name a directory."""
    if not isinstance(version, str) or not _VERSION_RE.fullmatch(version):
        raise InstallError('invalid version %s: use letters, digits and '
                           '"._+-", at most 64 characters'
                           % package_exc.quoted(version))
    return version


def resolve_command(command, install_dir):
    """Split a command line and resolve a relative program in an install."""
    argv = shlex.split(command)
    if not argv:
        raise InstallError('empty command')
    if not os.path.isabs(argv[0]) and os.sep in argv[0]:
        argv[0] = os.path.join(install_dir, argv[0])
    return argv


def run_health_command(command, install_dir, phase, timeout):
    """Run a health command; return None when it passes, else the reason."""
    argv = resolve_command(command, install_dir)
    env = dict(os.environ)
    env[PHASE_ENV] = phase
    try:
        proc = child_process.run(argv, timeout, merge_stderr=True, env=env,
                                 cwd=install_dir)
    except child_process.ChildTimeoutError:
        return '%s after %.1fs' % (HEALTH_TIMED_OUT, timeout)
    except OSError as e:
        return 'health command cannot run: %s' % e
    if proc.returncode != 0:
        return 'health command exited with %d: %s' % (proc.returncode,
                                                      venv_build.tail(proc))
    return None


def top_level_modules(wheel_paths):
    """Importable top-level names a set of wheels provides."""
    names = set()
    for path in wheel_paths:
        with zipfile.ZipFile(path) as zf:
            for name in zf.namelist():
                first = name.split('/', 1)[0]
                if first.endswith(('.dist-info', '.data')):
                    continue
                if name == first and name.endswith('.py'):
                    names.add(name[:-3])
                elif name == '%s/__init__.py' % first:
                    names.add(first)
    return sorted(n for n in names if n.isidentifier())


class InstallRoot:
    """The installs of one guest agent and the ``current`` pointer."""

    def __init__(self, root, lock, python=None, pip_timeout=600,
                 uv_program=venv_build.find_uv):
        """``uv_program``: the uv program's path, None for pip only."""
        self.root = root
        self.lock = lock
        self.versions_dir = os.path.join(root, VERSIONS_DIR)
        self.current_link = os.path.join(root, CURRENT_LINK)
        self.uv_cache = os.path.join(root, UV_CACHE)
        self.builder = venv_build.VenvBuilder(
            python or sys.executable, pip_timeout,
            uv_program() if callable(uv_program) else uv_program,
            self.uv_cache)
        self.wheel_store = wheel_store.WheelStore(root)
        os.makedirs(self.versions_dir, mode=0o755, exist_ok=True)

    def path(self, version):
        return os.path.join(self.versions_dir, check_version_name(version))

    def is_installed(self, version):
        return os.path.exists(os.path.join(self.path(version), MARKER))

    def health_check(self, version):
        """``(command, timeout)`` recorded with an install; Nones if none."""
        try:
            with open(os.path.join(self.path(version), HEALTH_FILE)) as f:
                check = json.load(f)
            return check['command'], check['timeout']
        # RecursionError: JSON nested thousands deep.
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            return None, None

    def current_version(self):
        """The version ``current`` points at, or None."""
        try:
            target = os.readlink(self.current_link)
        except FileNotFoundError:
            return None
        return os.path.basename(target.rstrip('/'))

    def installed_versions(self):
        """Complete installs, oldest first."""
        found = []
        for name in os.listdir(self.versions_dir):
            marker = os.path.join(self.versions_dir, name, MARKER)
            try:
                found.append((os.stat(marker).st_mtime, name))
            except FileNotFoundError:
                continue
        return [name for _, name in sorted(found)]

    def remove_incomplete(self, protect=()):
        """Delete half-built installs left by an interrupted run."""
        with self.lock:
            for name in os.listdir(self.versions_dir):
                path = os.path.join(self.versions_dir, name)
                if name in protect or os.path.exists(
                        os.path.join(path, MARKER)):
                    continue
                LOG.info('Removing incomplete install %s', path)
                if not os.path.islink(path):
                    # A killed agent's uv or pip may still be writing
                    # there, and into uv's cache: the cache goes too (the
                    # wheel store is checked as it is read).
                    child_process.kill_orphans(path)
                    self.clear_uv_cache()
                remove_tree(path)

    @property
    def uv_program(self):
        return self.builder.uv_program

    def clear_uv_cache(self):
        """Empty uv's cache; installs keep their linked files."""
        if os.path.lexists(self.uv_cache):
            LOG.info('Emptying the installer cache %s', self.uv_cache)
            shutil.rmtree(self.uv_cache, ignore_errors=True)

    def build(self, dest, wheel_paths):
        """Make a virtualenv at ``dest`` from kept wheels; return how.

        ``'uv'`` or ``'pip'`` (:meth:`venv_build.VenvBuilder.build`).
        """
        try:
            kept = self.wheel_store.add(wheel_paths)
        except OSError as e:
            raise InstallError('cannot keep the wheels: %s' % e)
        others = [os.path.join(self.versions_dir, v)
                  for v in self.installed_versions()]
        how = self.builder.build(dest, kept, others)
        wheel_store.write_record(dest, kept)
        return how

    def bound_uv_cache(self):
        """Empty uv's cache when too much of it is linked by no install."""
        with self.lock:
            spare = venv_build.unshared_bytes(self.uv_cache)
            if spare > UV_CACHE_SPARE:
                LOG.info('%d bytes of the installer cache are linked by '
                         'no install', spare)
                self.clear_uv_cache()

    def install(self, version, wheel_paths, health_command=None,
                health_timeout=30.0, console_script=None):
        """Build and check ``versions/<version>``; return its path.

        The health command and its timeout are recorded with the install,
        so that a rollback checks a version with its own command. With
        ``console_script`` (the manifest's guest agent), the check imports
        that script's entry point instead of every top-level module: a
        release with many dependencies ships modules that need test-only
        packages (testscenarios needs testtools), which the guest agent
        never imports.

        Raises InstallError, leaving no directory behind, when the
        virtualenv, pip or a check fails.
        """
        if not wheel_paths:
            raise InstallError('the package holds no wheels to install')
        for path in wheel_paths:
            if not path.endswith('.whl'):
                raise InstallError('%s is not a wheel'
                                   % os.path.basename(path))
        dest = self.path(version)
        if version == self.current_version():
            raise InstallError('version %s is the running install and '
                               'cannot be reinstalled' % version)
        with self.lock:
            if os.path.lexists(dest):
                remove_tree(dest)
            try:
                self.build(dest, wheel_paths)
                self._check(dest, wheel_paths, health_command,
                            health_timeout, console_script)
                if health_command:
                    with open(os.path.join(dest, HEALTH_FILE), 'w') as f:
                        json.dump({'command': health_command,
                                   'timeout': health_timeout}, f)
                marker = os.path.join(dest, MARKER)
                with open(marker, 'w') as f:
                    f.write('%s\n' % version)
                    f.flush()
                    os.fsync(f.fileno())
                writeback.fsync_directory(dest)
            except BaseException:
                remove_tree(dest)
                raise
            writeback.fsync_directory(self.versions_dir)
        return dest

    def _check(self, dest, wheel_paths, health_command, health_timeout,
               console_script=None):
        if console_script:
            self._check_entry_point(dest, wheel_paths, console_script)
        else:
            self._check_imports(dest, wheel_paths)
        if health_command:
            reason = run_health_command(health_command, dest, PREFLIGHT,
                                        health_timeout)
            if reason:
                raise InstallError('the new install failed its preflight '
                                   'check: %s' % reason)

    def _check_entry_point(self, dest, wheel_paths, console_script):
        entry = None
        for path in wheel_paths:
            try:
                entry = wheels_mod.console_scripts(path).get(console_script)
            except package_exc.PackageError as e:
                raise InstallError(str(e))
            if entry:
                break
        script = os.path.join(dest, 'bin', console_script)
        if not entry or not os.access(script, os.X_OK):
            raise InstallError('the new install has no console script %s'
                               % console_script)
        module, _, func = entry.partition(':')
        func = func.split('[')[0].strip()
        self.builder.run(
            [os.path.join(dest, 'bin', 'python'), '-I', '-c',
             'import importlib; m = importlib.import_module(%r); '
             'assert callable(getattr(m, %r))' % (module.strip(), func)],
            'importing %s, the entry point of %s, from the new install'
            % (entry, console_script), dest)

    def _check_imports(self, dest, wheel_paths):
        modules = top_level_modules(wheel_paths)
        if modules:
            self.builder.run(
                [os.path.join(dest, 'bin', 'python'), '-I', '-c',
                 'import %s' % ', '.join(modules)],
                'importing %s from the new install' % ', '.join(modules),
                dest)

    def switch(self, version):
        """Point ``current`` at an installed version, atomically."""
        with self.lock:
            if not self.is_installed(version):
                raise InstallError('version %s is not completely installed'
                                   % version)
            # One name for every switch, each under the lock: a link a
            # killed one left is replaced by the next, not kept for ever.
            tmp = self.current_link + '.tmp'
            if os.path.lexists(tmp):
                os.unlink(tmp)
            os.symlink(os.path.join(VERSIONS_DIR, version), tmp)
            os.replace(tmp, self.current_link)
            writeback.fsync_directory(self.root)
        LOG.info('current now points at %s', version)

    def prune(self, keep, protect):
        """Remove the oldest installs beyond ``keep``, never ``protect``."""
        with self.lock:
            protect = set(p for p in protect if p)
            current = self.current_version()
            if current:
                protect.add(current)
            installed = self.installed_versions()
            removable = [v for v in installed if v not in protect]
            excess = len(installed) - keep
            removed = []
            for version in removable[:max(excess, 0)]:
                path = self.path(version)
                if os.path.islink(path):
                    os.unlink(path)
                    removed.append(version)
                    continue
                # Drop the marker first: a crash mid-removal then leaves an
                # incomplete install, which the next start cleans up.
                os.unlink(os.path.join(path, MARKER))
                shutil.rmtree(path, ignore_errors=True)
                removed.append(version)
            if removed:
                LOG.info('Pruned old installs: %s', ', '.join(removed))
            self.wheel_store.keep_only(
                d for v in self.installed_versions()
                for d in wheel_store.read_record(self.path(v)))
            self.bound_uv_cache()
            return removed
