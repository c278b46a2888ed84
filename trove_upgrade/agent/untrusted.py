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

"""The steps that read untrusted data, in a child process with a deadline.

Downloading (a strategy plugin talking to a server) and verifying (the
manifest and payload checks) read bytes nobody vouched for yet. A bug there
may raise anything or loop for ever, and a thread that loops in Python code
cannot be stopped. So the agent runs each of these steps as
``python -m trove_upgrade.agent.untrusted`` in a session of its own, with
the agent's configuration files, and kills the whole session when
``[agent] download_step_timeout`` or ``verify_step_timeout`` passes, or
as soon as the agent stops (:class:`StepStopped`). The
child writes its answer, a small JSON document, to a file in its
directory; a child that dies without one failed too. Whatever happens,
the step ends in :class:`StepError` with a bounded reason.

The child works in ``<work>/fetch``, which belongs to ``[agent]
untrusted_user``: it reads its keys, settings and secrets as root, then
gives root up (:mod:`.unprivileged`) before it talks to a server or reads
a byte of the package. The child is told the SHA-256 of the wheels the
agent keeps, and fetches only the others where it can
(:mod:`trove_upgrade.agent.delta`). After the verify step root takes over
only the wheels the signed manifest names, copied into ``<work>/wheels``
and checked again against it, and takes the others from the wheels it
keeps, hashed again; what the child said is not believed.

:class:`InProcessSteps` runs the same code in the calling thread, for the
child itself and for unit tests that inject fakes.
"""

import ctypes
import importlib
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading

from oslo_config import cfg
from oslo_log import log as logging

from trove_upgrade.agent import delta
from trove_upgrade.agent import guest_files
from trove_upgrade.agent import reasons
from trove_upgrade.agent.strategies import exception as strategy_exc
from trove_upgrade.agent import unprivileged
from trove_upgrade.common import exception as package_exc
from trove_upgrade.package_format import manifest as manifest_mod

LOG = logging.getLogger(__name__)

PAYLOAD = 'package'
WHEELS = 'wheels'
# The child's directory in the upgrade's work directory, its user's.
UNTRUSTED_DIR = 'fetch'
RESULT_SUFFIX = '.result.json'
MAX_RESULT_SIZE = 1024 * 1024
DOWNLOAD = 'download'
VERIFY = 'verify'
_KILL_WAIT = 10
# What each step's result holds: the parent reads no other shape.
_OPTIONAL_TEXT = (str, type(None))
_RESULT_SHAPES = {
    DOWNLOAD: {'size': int, 'kept': int},
    VERIFY: {'wheels': list, 'health_command': _OPTIONAL_TEXT,
             'health_timeout': (int, type(None)),
             'console_script': _OPTIONAL_TEXT},
}
_PR_SET_PDEATHSIG = 1
# Standard modules the steps import on first use (dates, host names, a
# .netrc lookup), imported before root is given up: an interpreter under a
# private home directory (pyenv's under /root) is not the untrusted
# user's to read.
_IMPORTED_ON_FIRST_USE = ('_strptime', 'encodings.idna', 'netrc',
                          'stringprep')


class StepError(package_exc.TroveUpgradeError):
    """The step refused the package or failed; the message says why."""

    def __init__(self, reason):
        super().__init__(package_exc.bounded(reason))


class StepStopped(Exception):
    """The agent is stopping: the step was killed, the upgrade left as is.

    No failure of the upgrade: the journal still names the step it was
    at, and the next start takes it up as after a ``kill -9``
    (``UpgradePipeline.recover``).
    """

    def __init__(self, step):
        super().__init__('the %s step was stopped: the agent stops' % step)


def describe(exc):
    """A bounded reason for any exception an untrusted step raised."""
    if isinstance(exc, strategy_exc.StrategyError):
        return package_exc.bounded('download failed: %s' % exc)
    if isinstance(exc, package_exc.PackageError):
        return package_exc.bounded('package rejected: %s: %s'
                                   % (type(exc).__name__, exc))
    if isinstance(exc, OSError):
        return package_exc.bounded('local file system error: %s' % exc)
    return package_exc.bounded('internal error: %s' % reasons.of_error(exc))


class InProcessSteps:
    """Download and verify in this process; errors become StepError.

    ``store`` (a WheelStore) holds the wheels not to fetch; the child is
    given their SHA-256 (``held``) instead.
    """

    def __init__(self, conf, verifier, load_strategy, store=None):
        self.conf = conf
        self.verifier = verifier
        self.load_strategy = load_strategy
        self.store = store

    def _held(self, held):
        if held is not None:
            return held
        return self.store.held() if self.store is not None else []

    def _manifest(self, upgrade, work):
        path = os.path.join(work, PAYLOAD + manifest_mod.MANIFEST_SUFFIX)
        with open(path, 'rb') as f:
            data = f.read(self.verifier.max_manifest_size + 1)
        return self.verifier.verify_manifest(
            data, upgrade['to_version'], upgrade['from_version'],
            bool(upgrade.get('allow_downgrade')),
            self.conf.agent.max_package_size,
            upgrade.get('expected_manifest'))

    def download(self, upgrade, work, held=None):
        """Fetch and check the manifest; then ask for the payload.

        Nothing about the payload is asked of the store before its signed
        manifest is verified and found to be the one the upgrade expects.
        Only the wheels whose SHA-256 is not ``held`` are fetched, where
        the strategy reads ranges.
        """
        try:
            strategy = self.load_strategy(upgrade['strategy'])
            payload = os.path.join(work, PAYLOAD)
            strategy.fetch(upgrade['location'] + manifest_mod.MANIFEST_SUFFIX,
                           payload + manifest_mod.MANIFEST_SUFFIX,
                           self.verifier.max_manifest_size)
            manifest = self._manifest(upgrade, work)
            strategy.check_location(upgrade['location'])
            result = delta.download(strategy, upgrade['location'], manifest,
                                    self._held(held), payload)
            if result is None:
                # The signed size bounds the download: a server sending
                # more is cut off after one byte too many.
                result = {'size': strategy.fetch(upgrade['location'],
                                                 payload,
                                                 manifest.payload.size),
                          'kept': 0}
        except Exception as e:
            raise StepError(describe(e))
        return result

    def verify(self, upgrade, work, held=None):
        """Verify what was downloaded and write out its wheels.

        With a store, the wheels not fetched are taken from it.
        """
        payload = os.path.join(work, PAYLOAD)
        dest = os.path.join(work, WHEELS)
        try:
            manifest = self._manifest(upgrade, work)
            ranges = delta.fetched_ranges(payload)
            if ranges:
                wheels = delta.extract(self.verifier, ranges, manifest,
                                       self._held(held), dest)
            else:
                wheels = self.verifier.extract(
                    payload, manifest, dest,
                    self.conf.agent.max_package_size)
                os.unlink(payload)
            if self.store is not None:
                wheels = delta.take_kept(self.store, manifest, dest)
            command, timeout = self.verifier.health_check(manifest)
        except delta.KeptWheelMissing as e:
            raise StepError(str(e))
        except Exception as e:
            raise StepError(describe(e))
        guest_agent = manifest.guest_agent
        return {'wheels': wheels, 'health_command': command,
                'health_timeout': timeout,
                'console_script': (guest_agent.console_script
                                   if guest_agent else None)}

    def stop(self):
        """Nothing to kill: a step in the calling thread ends by itself."""


def _config_args(conf):
    """The agent's own ``--config-file``/``--config-dir`` arguments."""
    args = []
    for option, flag in (('config_file', '--config-file'),
                         ('config_dir', '--config-dir')):
        try:
            paths = getattr(conf, option) or ()
        except cfg.NoSuchOptError:
            # Not parsed from a command line (unit tests): defaults only.
            paths = ()
        for path in paths:
            args += [flag, path]
    return args


class ChildProcessSteps:
    """Each step in a child process killed at its deadline, or at a stop.

    ``verifier`` checks again, as root, what root takes over.
    """

    def __init__(self, conf, verifier=None, store=None):
        self.conf = conf
        self.verifier = verifier
        self.store = store
        self._lock = threading.Lock()
        self._child = None
        self._stopped = False

    def stop(self):
        """Kill the step in hand and refuse the next: the agent stops.

        A download stalled on its server, or in its last hour of
        ``download_step_timeout``, would otherwise hold the agent's stop
        until oslo.service's ``graceful_shutdown_timeout`` kills it.
        """
        with self._lock:
            self._stopped = True
            if self._child is not None:
                _signal_session(self._child)

    def download(self, upgrade, work):
        return self._run(DOWNLOAD, upgrade, work,
                         self.conf.agent.download_step_timeout)

    def verify(self, upgrade, work):
        self._run(VERIFY, upgrade, work, self.conf.agent.verify_step_timeout)
        try:
            return self._take_over(upgrade, work)
        except unprivileged.TakeOverError as e:
            raise StepError('the verified package was not taken over: %s'
                            % e)
        except (package_exc.PackageError, OSError) as e:
            raise StepError(describe(e))

    def _take_over(self, upgrade, work):
        """Root's copy of the wheels the signed manifest names, checked.

        The manifest is verified again here: the child's answer, and the
        files it left, come from a process that read untrusted bytes.
        """
        user_ids = unprivileged.ids(self.conf)
        owner = user_ids[0] if user_ids else None
        fetched = os.path.join(work, UNTRUSTED_DIR)
        dir_fd = unprivileged.open_dir(fetched, owner)
        try:
            fd = unprivileged.open_owned(
                dir_fd, PAYLOAD + manifest_mod.MANIFEST_SUFFIX, owner,
                self.verifier.max_manifest_size)
            with open(fd, 'rb') as f:
                data = f.read(self.verifier.max_manifest_size + 1)
            manifest = self.verifier.verify_manifest(
                data, upgrade['to_version'], upgrade['from_version'],
                bool(upgrade.get('allow_downgrade')),
                self.conf.agent.max_package_size)
            wheels_fd = unprivileged.open_dir(WHEELS, owner, dir_fd=dir_fd)
            dest = os.path.join(work, WHEELS)
            shutil.rmtree(dest, ignore_errors=True)
            os.mkdir(dest, 0o700)
            try:
                for entry in manifest.files:
                    if unprivileged.left(wheels_fd, entry.name):
                        unprivileged.copy_verified(
                            wheels_fd, entry, owner,
                            os.path.join(dest, entry.name))
            finally:
                os.close(wheels_fd)
        finally:
            os.close(dir_fd)
        shutil.rmtree(fetched)
        try:
            wheels = delta.take_kept(self.store, manifest, dest)
        except delta.KeptWheelMissing as e:
            raise StepError(str(e))
        command, timeout = self.verifier.health_check(manifest)
        guest_agent = manifest.guest_agent
        return {'wheels': wheels, 'health_command': command,
                'health_timeout': timeout,
                'console_script': (guest_agent.console_script
                                   if guest_agent else None)}

    def _run(self, step, upgrade, work, timeout):
        fetched = os.path.join(work, UNTRUSTED_DIR)
        os.makedirs(fetched, exist_ok=True)
        unprivileged.give(fetched, unprivileged.ids(self.conf))
        result_path = os.path.join(fetched, step + RESULT_SUFFIX)
        held = self.store.held() if self.store is not None else []
        request = json.dumps({'config': _config_args(self.conf),
                              'step': step, 'upgrade': upgrade,
                              'held': held,
                              'work': fetched, 'result': result_path,
                              'parent': os.getpid()})
        with self._lock:
            if self._stopped:
                raise StepStopped(step)
            proc = subprocess.Popen(
                [sys.executable, '-m', __name__], stdin=subprocess.PIPE,
                start_new_session=True, close_fds=True)
            self._child = proc
        try:
            proc.communicate(request.encode(), timeout=timeout)
        except subprocess.TimeoutExpired:
            self._forget(proc)
            raise StepError('the %s step did not finish in %gs and was '
                            'stopped' % (step, timeout))
        except BaseException:
            self._forget(proc)
            raise
        # Helpers the child started (rsync, say) die with it.
        if self._forget(proc):
            raise StepStopped(step)
        return _read_result(result_path, step, proc.returncode)

    def _forget(self, proc):
        """Kill ``proc``'s session, no longer ours; whether we stopped."""
        with self._lock:
            self._child = None
            stopped = self._stopped
        _kill_session(proc)
        return stopped


def _signal_session(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_session(proc):
    _signal_session(proc)
    try:
        proc.wait(_KILL_WAIT)
    except subprocess.TimeoutExpired:
        LOG.error('Child process %d does not die', proc.pid)


def _read_result(path, step, returncode):
    try:
        # The child's directory is its user's: no link, FIFO or device.
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with open(fd, 'rb') as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise OSError('not a regular file')
            data = f.read(MAX_RESULT_SIZE + 1)
        os.unlink(path)
        result = json.loads(data) if len(data) <= MAX_RESULT_SIZE else None
    # RecursionError: a result nested thousands deep.
    except (OSError, ValueError, RecursionError):
        result = None
    if not isinstance(result, dict) or not (
            _has_shape(result.get('ok'), _RESULT_SHAPES[step])
            or isinstance(result.get('failed'), str)):
        raise StepError('the %s step ended without a result (exit status '
                        '%s)%s' % (step, returncode, _full_disk(path)))
    if 'failed' in result:
        raise StepError(package_exc.bounded(result['failed']))
    return result['ok']


def _has_shape(ok, shape):
    """Whether ``ok`` holds exactly the keys of ``shape``, of its types."""
    return (isinstance(ok, dict) and ok.keys() == shape.keys()
            and all(isinstance(ok[k], t) and not isinstance(ok[k], bool)
                    for k, t in shape.items())
            and all(isinstance(w, str) for w in ok.get('wheels', ())))


def _full_disk(path):
    """Why a child left no result at ``path``, when its disk is full.

    A download that fills the work directory's file system leaves the
    child no room for its answer; the reason recorded says so.
    """
    try:
        full = os.statvfs(os.path.dirname(path)).f_bavail == 0
    except OSError:
        return ''
    return ': no space is left on the file system of its work directory' \
        if full else ''


def _write_result(path, result):
    """Write the child's answer as the agent writes its guest files.

    Its own open() of ``<path>.tmp`` followed a symlink planted there,
    and the answer's name was not made durable.
    """
    guest_files.write_text(path, json.dumps(result))


def _die_with_parent(parent):
    """Exit when the agent dies (``kill -9`` included), Linux only.

    The child has a session of its own, so a signal to the agent's process
    group does not reach it; without this it would go on writing into a
    work directory the restarted agent cleans and reuses.
    """
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        LOG.warning('Cannot ask to die with the agent (no prctl)')
    if os.getppid() != parent:
        sys.exit(1)


def main():
    """The child: one step, its answer in the result file, exit 0."""
    request = json.loads(sys.stdin.read())
    _die_with_parent(request['parent'])
    # Imported here: the parent only needs the classes above.
    from trove_upgrade.agent import strategies
    from trove_upgrade.agent import verifier as verifier_mod
    from trove_upgrade import conf as tu_conf
    from trove_upgrade import version

    conf = tu_conf.CONF
    conf(request['config'], project='trove-upgrade',
         prog='trove-upgrade-agent',
         version=version.version_info.version_string())
    logging.setup(conf, 'trove-upgrade-agent')
    # The untrusted user may not look up the work directory's parents:
    # its paths go through a descriptor opened as root (and its programs,
    # rsync, work in it).
    os.chdir(request['work'])
    work = '/proc/self/fd/%d' % os.open(os.curdir,
                                        os.O_RDONLY | os.O_DIRECTORY)
    result_path = os.path.join(work, os.path.basename(request['result']))
    try:
        # As root: the keys, the strategy's settings and its secrets.
        verifier = verifier_mod.PackageVerifier.from_conf(conf)
        strategy = (strategies.load(request['upgrade']['strategy'],
                                    conf=conf)
                    if request['step'] == DOWNLOAD else None)
        steps = InProcessSteps(conf, verifier, lambda name: strategy)
        user_ids = unprivileged.ids(conf)
        if user_ids is not None:
            for name in _IMPORTED_ON_FIRST_USE:
                importlib.import_module(name)
            unprivileged.drop(user_ids)
            # The parent-death signal does not survive the switch.
            _die_with_parent(request['parent'])
        run = getattr(steps, request['step'])
        result = {'ok': run(request['upgrade'], work,
                            held=request.get('held', []))}
    except StepError as e:
        result = {'failed': str(e)}
    except Exception as e:
        result = {'failed': describe(e)}
    try:
        _write_result(result_path, result)
        return 0
    except OSError as e:
        error = e
    # Out of the except block: one line, no traceback of a full disk.
    LOG.error('The %(step)s step cannot write its result %(path)s: '
              '%(error)s', {'step': request['step'],
                            'path': request['result'], 'error': error})
    return 1


if __name__ == '__main__':
    sys.exit(main())
