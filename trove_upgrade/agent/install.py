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

A version is built in a fresh virtualenv at its final path (virtualenv
scripts record their interpreter's absolute path) from the package's own
wheels only, its byte code compiled, and checked before anything points at
it. uv builds it (``uv pip install --no-index --offline --no-build``); pip
(``pip install --no-index``) where uv is not installed or refuses, in a
virtualenv made anew.

uv unpacks each wheel once into its cache, ``uv-cache`` beside
``versions``, and hard-links the files from there, so an unchanged wheel
costs neither a copy nor disk space, and removing an install (or the cache)
leaves the others whole. uv knows a local wheel by its path, and each
upgrade verifies its wheels into a work directory of its own: uv is given
them at paths named by their SHA-256 (``uv-wheels/<sha256>/<file>``, hard
links kept from the first time), so a wheel verified again is the same
wheel to uv. Byte code is compiled after the wheels are in: a source file
that is the very file (the same inode) of an older install takes that
install's compiled file, hard-linked too, and ``compileall`` compiles the
rest; compiling, not unpacking, is most of an install's CPU. Files of the
cache that no install links any more, and the wheels kept, are dead weight:
past ``UV_CACHE_SPARE`` bytes of them both are emptied (the next build
unpacks and compiles everything), and so they are after an interrupted
build.

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

import glob
import hashlib
import json
import os
import re
import shlex
import shutil
import sys
import time
import zipfile

from oslo_log import log as logging

try:
    import uv
except ImportError:
    # An agent installed without uv: pip builds its installs.
    uv = None

from trove_upgrade.agent import child_process
from trove_upgrade.agent import reasons
from trove_upgrade.common import exception
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
UV_WHEELS = 'uv-wheels'
# uv's own default on Linux; measured against the others in
# doc/source/admin/agent.rst.
UV_LINK_MODE = 'hardlink'
UV_CACHE_SPARE = 256 * 1024 * 1024
COMPILE_LIST = '.trove-upgrade-compile'
RUNNING = 'running'

_VERSION_RE = re.compile(r'^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$')


class InstallError(exception.TroveUpgradeError):
    """A new install could not be built or did not pass its checks."""


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


def _tail(finished):
    return reasons.error_line(finished.stdout.tail)


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
                                                      _tail(proc))
    return None


def find_uv():
    """The path of the uv program installed with the agent, or None."""
    if uv is None:
        return None
    try:
        return uv.find_uv_bin()
    except FileNotFoundError:
        return None


def _uv_environment():
    # UV_* variables of the agent's environment (an index URL, a config
    # file, a system Python) must not change what uv installs from where.
    return {k: v for k, v in os.environ.items() if not k.startswith('UV_')}


def site_packages(install_dir):
    """The ``site-packages`` directories of a virtualenv."""
    return sorted(glob.glob(os.path.join(install_dir, 'lib', 'python*',
                                         'site-packages')))


def _sources(install_dir):
    """``(device, DirEntry)`` of each ``.py`` file of a virtualenv.

    The inode comes with the directory entry, with no ``stat`` per file.
    """
    for top in site_packages(install_dir):
        device = os.stat(top).st_dev
        folders = [top]
        while folders:
            with os.scandir(folders.pop()) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        if entry.name != '__pycache__':
                            folders.append(entry.path)
                    elif (entry.name.endswith('.py')
                          and entry.is_file(follow_symlinks=False)):
                        yield device, entry


def _compiled_name(source, tag):
    folder, name = os.path.split(source)
    return os.path.join(folder, '__pycache__',
                        '%s.%s.pyc' % (name[:-3], tag))


def link_compiled_files(dest, others, tag):
    """Give ``dest`` the compiled files of its sources found in ``others``.

    Only for a source that is the same file (inode) in both: its content
    is then the same, and so are the modification time and size a compiled
    file records, which the import system checks before it uses one.
    Python replaces a compiled file rather than writing into it, so a
    shared one never changes under the other install, and on import it
    sets the file name recorded in the code to the source's. ``tag`` is the
    interpreter's ``sys.implementation.cache_tag``. Returns the sources
    left to compile.
    """
    known = {}
    for other in others:
        for device, entry in _sources(other):
            compiled = _compiled_name(entry.path, tag)
            known[(device, entry.inode())] = compiled
    left = []
    for device, entry in _sources(dest):
        compiled = known.get((device, entry.inode()))
        if compiled is not None:
            target = _compiled_name(entry.path, tag)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            try:
                os.link(compiled, target)
                continue
            except FileNotFoundError:
                pass
            except FileExistsError:
                continue
        left.append(entry.path)
    return left


def unshared_bytes(directory):
    """Bytes of the files under ``directory`` that have no other link."""
    total = 0
    for parent, _, names in os.walk(directory):
        for name in names:
            try:
                st = os.lstat(os.path.join(parent, name))
            except FileNotFoundError:
                continue
            if st.st_nlink == 1:
                total += st.st_blocks * 512
    return total


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


def _find_links(wheel_paths):
    return sorted({os.path.dirname(os.path.abspath(p)) for p in wheel_paths})


class InstallRoot:
    """The installs of one guest agent and the ``current`` pointer."""

    def __init__(self, root, lock, python=None, pip_timeout=600,
                 uv_program=find_uv):
        """``uv_program``: the uv program's path, None for pip only."""
        self.root = root
        self.lock = lock
        self.versions_dir = os.path.join(root, VERSIONS_DIR)
        self.current_link = os.path.join(root, CURRENT_LINK)
        self.python = python or sys.executable
        self.pip_timeout = pip_timeout
        self.uv_program = uv_program() if callable(uv_program) else uv_program
        self.uv_cache = os.path.join(root, UV_CACHE)
        self.uv_wheels = os.path.join(root, UV_WHEELS)
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
                    # there, and into uv's cache: the cache goes too.
                    child_process.kill_orphans(path)
                    self.clear_uv_cache()
                remove_tree(path)

    def clear_uv_cache(self):
        """Empty uv's cache and wheels; installs keep their linked files."""
        for path in (self.uv_cache, self.uv_wheels):
            if os.path.lexists(path):
                LOG.info('Emptying the installer cache %s', path)
                shutil.rmtree(path, ignore_errors=True)

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

    def _run(self, argv, what, dest, env=None):
        # In the install: a kill -9 of the agent leaves the program
        # running, still writing into ``dest``, and the next start's
        # ``remove_incomplete`` finds it by its working directory.
        try:
            proc = child_process.run(argv, self.pip_timeout,
                                     merge_stderr=True, cwd=dest, env=env)
        except child_process.ChildTimeoutError:
            raise InstallError('%s timed out after %ss'
                               % (what, self.pip_timeout))
        except OSError as e:
            raise InstallError('%s cannot run: %s' % (what, e))
        if proc.returncode != 0:
            raise InstallError('%s failed with status %d: %s'
                               % (what, proc.returncode, _tail(proc)))

    def build(self, dest, wheel_paths):
        """Make a virtualenv at ``dest`` holding the wheels; return how.

        ``'uv'`` or ``'pip'``: pip builds it anew when uv is not installed
        or refuses (its reason is logged, and quoted if pip fails too).
        """
        started = time.monotonic()
        refused = None
        installer = 'uv'
        if self.uv_program:
            try:
                self._new_virtualenv(dest)
                self._uv_install(dest, wheel_paths)
            except InstallError as e:
                refused = str(e)
                LOG.warning('uv could not build %s, building it with pip: '
                            '%s', dest, refused)
                remove_tree(dest)
        if refused or not self.uv_program:
            installer = 'pip'
            self._new_virtualenv(dest)
            try:
                self._pip_install(dest, wheel_paths)
            except InstallError as e:
                if refused:
                    raise InstallError('%s (uv before it: %s)'
                                       % (e, refused))
                raise
        LOG.info('Installed %s with %s in %.1fs', dest, installer,
                 time.monotonic() - started)
        return installer

    def _new_virtualenv(self, dest):
        os.mkdir(dest)
        self._run([self.python, '-m', 'venv', '--without-pip', dest],
                  'creating the virtualenv', dest)

    def _uv_install(self, dest, wheel_paths):
        argv = [self.uv_program, 'pip', 'install', '--no-config',
                '--python', os.path.join(dest, 'bin', 'python'),
                '--no-index', '--offline', '--no-build',
                '--no-python-downloads', '--link-mode', UV_LINK_MODE,
                '--cache-dir', self.uv_cache, '--quiet']
        try:
            argv += self._named_by_content(wheel_paths)
        except OSError as e:
            raise InstallError('cannot keep the wheels for uv: %s' % e)
        self._run(argv, 'uv pip install', dest, env=_uv_environment())
        others = [os.path.join(self.versions_dir, v)
                  for v in self.installed_versions()]
        left = link_compiled_files(
            dest, [o for o in others if not os.path.islink(o)],
            self._cache_tag(dest))
        LOG.debug('%d source files of %s left to compile', len(left), dest)
        self._compile(dest, left)

    def _cache_tag(self, dest):
        if os.path.realpath(self.python) == os.path.realpath(sys.executable):
            return sys.implementation.cache_tag
        try:
            proc = child_process.run(
                [os.path.join(dest, 'bin', 'python'), '-I', '-c',
                 'import sys; print(sys.implementation.cache_tag)'],
                self.pip_timeout, cwd=dest)
        except (child_process.ChildTimeoutError, OSError) as e:
            raise InstallError('the new install has no usable interpreter: '
                               '%s' % e)
        tag = proc.stdout.tail.strip()
        if proc.returncode != 0 or not tag.isprintable() or '/' in tag:
            raise InstallError('the new install has no usable interpreter: '
                               '%s' % _tail(proc))
        return tag

    def _named_by_content(self, wheel_paths):
        """The wheels at ``uv-wheels/<sha256>/<file>``, for uv's cache.

        A path already there holds the same bytes and is kept as it is
        (its time too, which uv compares); a new one is a hard link to
        the verified wheel (a copy across file systems), renamed into
        place whole.
        """
        named = []
        for path in wheel_paths:
            digest = hashlib.sha256()
            with open(path, 'rb') as f:
                for block in iter(lambda: f.read(1 << 20), b''):
                    digest.update(block)
            folder = os.path.join(self.uv_wheels, digest.hexdigest())
            target = os.path.join(folder, os.path.basename(path))
            if not os.path.exists(target):
                os.makedirs(folder, exist_ok=True)
                partial = target + '.partial'
                if os.path.lexists(partial):
                    os.unlink(partial)
                try:
                    os.link(path, partial)
                except OSError:
                    shutil.copyfile(path, partial)
                os.replace(partial, target)
            named.append(target)
        return named

    def _compile(self, dest, sources):
        # As pip does, a file that does not compile (a Python 2 example in
        # a distribution, say) is no error: the checks import what runs.
        # One process: with most files linked, workers (-j) cost more CPU
        # than the little compiling left, and the guest's CPU is what the
        # database beside it shares.
        if not sources:
            return
        listing = os.path.join(dest, COMPILE_LIST)
        with open(listing, 'w') as f:
            f.write(''.join('%s\n' % path for path in sources))
        argv = [os.path.join(dest, 'bin', 'python'), '-I', '-m',
                'compileall', '-q', '-i', listing]
        try:
            proc = child_process.run(argv, self.pip_timeout,
                                     merge_stderr=True, cwd=dest)
        except child_process.ChildTimeoutError:
            raise InstallError('compiling byte code timed out after %ss'
                               % self.pip_timeout)
        except OSError as e:
            raise InstallError('compiling byte code cannot run: %s' % e)
        finally:
            os.unlink(listing)
        if proc.returncode != 0:
            LOG.warning('Some files of %s do not compile: %s', dest,
                        _tail(proc))

    def bound_uv_cache(self):
        """Empty uv's cache when too much of it is linked by no install."""
        with self.lock:
            spare = (unshared_bytes(self.uv_cache)
                     + unshared_bytes(self.uv_wheels))
            if spare > UV_CACHE_SPARE:
                LOG.info('%d bytes of the installer cache are linked by '
                         'no install', spare)
                self.clear_uv_cache()

    def _pip_install(self, dest, wheel_paths):
        argv = [self.python, '-m', 'pip', '--python',
                os.path.join(dest, 'bin', 'python'), 'install',
                '--no-index', '--no-cache-dir', '--disable-pip-version-check',
                '--no-input', '--quiet']
        for link in _find_links(wheel_paths):
            argv += ['--find-links', link]
        argv += [os.path.abspath(p) for p in wheel_paths]
        self._run(argv, 'pip install', dest)

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
        self._run([os.path.join(dest, 'bin', 'python'), '-I', '-c',
                   'import importlib; m = importlib.import_module(%r); '
                   'assert callable(getattr(m, %r))' % (module.strip(),
                                                        func)],
                  'importing %s, the entry point of %s, from the new '
                  'install' % (entry, console_script), dest)

    def _check_imports(self, dest, wheel_paths):
        modules = top_level_modules(wheel_paths)
        if modules:
            self._run([os.path.join(dest, 'bin', 'python'), '-I', '-c',
                       'import %s' % ', '.join(modules)],
                      'importing %s from the new install'
                      % ', '.join(modules), dest)

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
            self.bound_uv_cache()
            return removed
