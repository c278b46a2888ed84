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

"""Build a virtualenv from verified wheels: uv first, pip where it refuses.

A version is built in a fresh virtualenv at its final path (virtualenv
scripts record their interpreter's absolute path) from the package's own
wheels only, its byte code compiled. uv builds it (``uv pip install
--no-index --offline --no-build``); pip (``pip install --no-index``) where
uv is not installed or refuses, in a virtualenv made anew.

uv unpacks each wheel once into its cache, ``uv-cache`` beside
``versions``, and hard-links the files from there, so an unchanged wheel
costs neither a copy nor disk space, and removing an install (or the cache)
leaves the others whole. uv knows a local wheel by its path: it is given
the wheels at their paths in the wheel store
(:mod:`trove_upgrade.agent.wheel_store`), named by their SHA-256, so a
wheel verified again is the same wheel to uv. Byte code is compiled after
the wheels are in: a source file that is the very file (the same inode) of
an older install takes that install's compiled file, hard-linked too, and
``compileall`` compiles the rest; compiling, not unpacking, is most of an
install's CPU.

The programs that build run in the new install (their working
directory): a ``kill -9`` of the agent leaves them running (uv, and the
interpreters compiling byte code), and the next start finds them there
and kills them before it removes the directory they would go on writing
into.
"""

import glob
import os
import shutil
import sys
import time

from oslo_log import log as logging

try:
    import uv
except ImportError:
    # An agent installed without uv: pip builds its installs.
    uv = None

from trove_upgrade.agent import child_process
from trove_upgrade.agent import reasons
from trove_upgrade.common import exception

LOG = logging.getLogger(__name__)

# uv's own default on Linux; measured against the others in
# doc/source/admin/agent.rst.
UV_LINK_MODE = 'hardlink'
COMPILE_LIST = '.trove-upgrade-compile'


class InstallError(exception.TroveUpgradeError):
    """A new install could not be built or did not pass its checks."""


def tail(finished):
    """The last line a finished child program wrote, for a reason."""
    return reasons.error_line(finished.stdout.tail)


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


def _find_links(wheel_paths):
    return sorted({os.path.dirname(os.path.abspath(p)) for p in wheel_paths})


class VenvBuilder:
    """Builds virtualenvs with one interpreter, uv (if any) and pip."""

    def __init__(self, python, pip_timeout, uv_program, uv_cache):
        self.python = python
        self.pip_timeout = pip_timeout
        self.uv_program = uv_program
        self.uv_cache = uv_cache

    def run(self, argv, what, dest, env=None):
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
                               % (what, proc.returncode, tail(proc)))

    def build(self, dest, wheel_paths, others=()):
        """Make a virtualenv at ``dest`` holding the wheels; return how.

        ``others`` are installs whose compiled files a new one may share.

        ``'uv'`` or ``'pip'``: pip builds it anew when uv is not installed
        or refuses (its reason is logged, and quoted if pip fails too).
        """
        started = time.monotonic()
        refused = None
        installer = 'uv'
        if self.uv_program:
            try:
                self._new_virtualenv(dest)
                self._uv_install(dest, wheel_paths, others)
            except InstallError as e:
                refused = str(e)
                LOG.warning('uv could not build %s, building it with pip: '
                            '%s', dest, refused)
                shutil.rmtree(dest, ignore_errors=True)
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
        self.run([self.python, '-m', 'venv', '--without-pip', dest],
                 'creating the virtualenv', dest)

    def _uv_install(self, dest, wheel_paths, others):
        argv = [self.uv_program, 'pip', 'install', '--no-config',
                '--python', os.path.join(dest, 'bin', 'python'),
                '--no-index', '--offline', '--no-build',
                '--no-python-downloads', '--link-mode', UV_LINK_MODE,
                '--cache-dir', self.uv_cache, '--quiet']
        argv += list(wheel_paths)
        self.run(argv, 'uv pip install', dest, env=_uv_environment())
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
                               '%s' % tail(proc))
        return tag

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
                        tail(proc))

    def _pip_install(self, dest, wheel_paths):
        argv = [self.python, '-m', 'pip', '--python',
                os.path.join(dest, 'bin', 'python'), 'install',
                '--no-index', '--no-cache-dir', '--disable-pip-version-check',
                '--no-input', '--quiet']
        for link in _find_links(wheel_paths):
            argv += ['--find-links', link]
        argv += [os.path.abspath(p) for p in wheel_paths]
        self.run(argv, 'pip install', dest)
