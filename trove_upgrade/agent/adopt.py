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

"""Bring an existing Trove guest agent install under management.

Trove's images install the guest agent in a virtualenv
(``/opt/guest-agent-venv``) and run it from ``guest-agent.service``. A
virtualenv cannot move (its scripts name their own path), so adoption does
not copy or reinstall it: ``versions/<version>`` becomes a symlink to it,
the install marker is written into it, ``current`` points at it, the
journal records it as the last known good version, and the service manager
is pointed at ``current`` for the *next* start: the image's program link
(``/usr/local/bin/guest-agent``, which ``guest-agent.service`` runs) is
replaced atomically by one to ``current/bin/trove-guestagent``, and under
systemd a drop-in sets the same path as ``ExecStart``. The running guest
agent is neither restarted nor touched; its pid is recorded so the agent
adopts it. Last, Trove's configuration gets the RPC ping enabled.

Adoption is all or nothing. Each step records the paths it is about to
change in ``<install_root>/adopt-undo.json`` first
(:mod:`trove_upgrade.agent.undo_log`); a step that fails has every change
undone, newest first (and systemd reloaded when its drop-in was put back),
and :class:`AdoptionStepError` names the step. Removing that log once every
step is done is the commit. A run killed before it leaves the log, and the
next run undoes the killed run's changes before adopting afresh. The steps
are checkpoints of :mod:`trove_upgrade.agent.pause_hook`, named
``adopt-<step>``, and ``adopt-commit`` comes last.

Adoption is idempotent: adopting the install that is already current, or
that was adopted before and upgraded from since (its marker says so), says
so and changes nothing. A directory that is not a virtualenv holding the
guest agent's console script is refused with the reason.
"""

import configparser
import glob
import os

from oslo_log import log as logging

from trove_upgrade.agent import guest_files
from trove_upgrade.agent import init_system
from trove_upgrade.agent import install
from trove_upgrade.agent import pause_hook
from trove_upgrade.agent import trove_guest
from trove_upgrade.agent import undo_log
from trove_upgrade.common import exception
from trove_upgrade.common import exception as package_exc
from trove_upgrade.package_format import writeback

LOG = logging.getLogger(__name__)

DEFAULT_VENV = '/opt/guest-agent-venv'
UNDO_LOG = 'adopt-undo.json'
CHECKPOINT_PREFIX = 'adopt-'
COMMIT = 'commit'
DROP_IN_STEP = 'drop-in'


class AdoptionRefusedError(exception.TroveUpgradeError):
    """The install cannot be adopted; the message says why."""

    def __init__(self, message):
        super().__init__(guest_files.bounded(message))


class AdoptionStepError(exception.TroveUpgradeError):
    """A step failed; the message names it and says what was undone."""

    def __init__(self, message):
        # One line: a reason may quote a service manager's output.
        super().__init__(guest_files.bounded(' '.join(message.split())))


def _dist_infos(venv):
    pattern = os.path.join(venv, 'lib', 'python*', 'site-packages',
                           '*.dist-info')
    return sorted(glob.glob(pattern))


def _read(dist_info, name):
    """A metadata file of ``dist_info``; None when absent or unreadable."""
    try:
        return guest_files.read_text(os.path.join(dist_info, name))
    except guest_files.UnreadableFileError:
        return None


def _dist_version(dist_info):
    """The ``Version:`` of the METADATA headers, or None."""
    for line in (_read(dist_info, 'METADATA') or '').splitlines():
        if line.startswith('Version:'):
            return line.split(':', 1)[1].strip()
        if not line.strip():
            break
    return None


def _declares(dist_info, script):
    text = _read(dist_info, 'entry_points.txt')
    if text is None:
        return False
    parser = configparser.ConfigParser(delimiters=('=',),
                                       interpolation=None)
    parser.optionxform = str
    try:
        parser.read_string(text)
    except configparser.Error:
        return False
    return (parser.has_section('console_scripts')
            and parser.has_option('console_scripts', script))


def inspect_venv(venv, console_script):
    """``(distribution version)`` of the guest agent in ``venv``.

    Raises AdoptionRefusedError naming the first thing that does not match the
    layout of a Trove image. A distribution whose metadata cannot be read
    (not a file, not UTF-8, larger than ``guest_files.MAX_TEXT_FILE_SIZE``)
    declares nothing; the version it declares must name a directory.
    """
    venv = os.path.abspath(venv)
    if not os.path.isdir(venv):
        raise AdoptionRefusedError('%s does not exist or is not a directory'
                                   % package_exc.quoted(venv))
    for needed in ('pyvenv.cfg', os.path.join('bin', 'python')):
        if not os.path.exists(os.path.join(venv, needed)):
            raise AdoptionRefusedError('%s is not a virtualenv: it has no %s'
                                       % (package_exc.quoted(venv), needed))
    script = os.path.join(venv, 'bin', console_script)
    if not os.path.isfile(script) or not os.access(script, os.X_OK):
        raise AdoptionRefusedError(
            '%s has no executable bin/%s: not a guest agent '
            'install' % (package_exc.quoted(venv),
                         console_script))
    for dist_info in _dist_infos(venv):
        if _declares(dist_info, console_script):
            version = _dist_version(dist_info)
            if version:
                try:
                    return install.check_version_name(version)
                except install.InstallError as e:
                    raise AdoptionRefusedError(
                        '%s declares %s: %s' % (dist_info, console_script, e))
    raise AdoptionRefusedError(
        'no distribution in %s declares the console script '
        '%s' % (package_exc.quoted(venv), console_script))


def point_link(link, target):
    """Atomically make ``link`` a symlink to ``target``; True if changed."""
    if os.path.islink(link) and os.readlink(link) == target:
        return False
    tmp = '%s.trove-upgrade-tmp' % link
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.replace(tmp, link)
    writeback.fsync_directory(os.path.dirname(link))
    return True


class _Steps:
    """Records each step's paths in the undo log before the step runs."""

    def __init__(self, root, log):
        self.root = root
        self.log = log
        self.current = 'starting'

    def begin(self, name, what, path, replace_dir=False):
        """Step ``name`` (``what`` it does) is about to change ``path``."""
        self.current = what
        self.log.will_make_dirs(name, os.path.dirname(path))
        self.log.will_change(name, path, replace_dir=replace_dir)
        pause_hook.pause_at(self.root, CHECKPOINT_PREFIX + name)


def interrupted(root):
    """Whether an adoption of the install root ``root`` was killed.

    Its undo log is left until the next ``trove-upgrade-adopt`` undoes it
    and adopts again; an agent started on the half-adopted root first
    would act on a ``current`` and journal the adoption may take back.
    """
    return os.path.lexists(os.path.join(root, UNDO_LOG))


def _undo(log, driver):
    """Put back what ``log`` recorded, and what systemd read of it."""
    undone = log.undo()
    if DROP_IN_STEP in undone and isinstance(
            driver, init_system.SystemdDriver):
        driver.reload()
    log.done()


_UNDO_ERRORS = (undo_log.UndoLogError, init_system.InitSystemError,
                OSError)


def _undo_interrupted(log, driver):
    try:
        log.load()
        _undo(log, driver)
    except _UNDO_ERRORS as e:
        raise AdoptionStepError(
            'cannot undo the adoption interrupted earlier: '
            '%s' % e)
    LOG.warning('Undid the changes of an adoption interrupted earlier')


def _fail(steps, driver, error):
    """Undo every step done; raise AdoptionStepError naming the failed one."""
    failed = '%s failed: %s' % (steps.current,
                                str(error) or type(error).__name__)
    try:
        _undo(steps.log, driver)
    except _UNDO_ERRORS as e:
        raise AdoptionStepError('%s; undoing the adoption failed too: %s; run '
                                'trove-upgrade-adopt again to finish undoing '
                                'it' % (failed, e)) from error
    if not isinstance(error, Exception):
        raise error
    raise AdoptionStepError('%s; every change was undone' % failed) from error


def _marker_text(version):
    return '%s\nadopted\n' % version


def _adopted_before(venv, version):
    """Whether ``venv`` holds the marker of its adoption as ``version``.

    It stays in the virtualenv when the install root moves on to an
    upgrade, and when pruning drops the root's link to the virtualenv.
    """
    try:
        return guest_files.read_text(
            os.path.join(venv, install.MARKER)) == _marker_text(version)
    except guest_files.UnreadableFileError:
        return False


def _adopted(installs, venv, version):
    """False when nothing manages the install root yet, True when done.

    Done: the root manages this install, or did and was upgraded since,
    as the adoption before every start of the agent finds after the
    first upgrade (``install/guest-image.rst``), which must not fail it.
    """
    current = installs.current_version()
    if current is None:
        return False
    if current == version and os.path.realpath(
            installs.path(version)) == venv:
        return True
    if _adopted_before(venv, version):
        LOG.info('%(venv)s was adopted as %(version)s before; the install '
                 'root has moved on to %(current)s',
                 {'venv': venv, 'version': version, 'current': current})
        return True
    raise AdoptionRefusedError(
        'this install root already manages version %s (%s); refusing to '
        'adopt %s as %s' % (current, os.path.realpath(installs.path(current)),
                            venv, version))


def adopt(installs, journal, venv, console_script, version=None,
          supervisor=None, program_link=None, trove_config_dir=None):
    """Adopt ``venv``, all or nothing; return ``(version, changed)``.

    ``version`` defaults to the version of the distribution providing
    ``console_script``. ``supervisor`` (a service-managed one) records the
    guest agent its service manager runs now, and points the service at
    ``current``; ``program_link``, when it exists, is pointed at
    ``current`` too; ``trove_config_dir`` gets the RPC ping enabled.
    Raises AdoptionRefusedError, changing nothing, for an install that cannot
    be
    adopted, and AdoptionStepError when a step failed and was undone.
    """
    venv = os.path.realpath(venv)
    found = inspect_venv(venv, console_script)
    version = install.check_version_name(version or found)
    driver = getattr(supervisor, 'driver', None)
    with installs.lock:
        log = undo_log.UndoLog(os.path.join(installs.root, UNDO_LOG))
        if log.pending():
            _undo_interrupted(log, driver)
        adopted = _adopted(installs, venv, version)
        steps = _Steps(installs.root, log)
        try:
            changed = _run_steps(steps, installs, journal, venv, version,
                                 adopted, console_script, supervisor,
                                 driver, program_link, trove_config_dir)
            steps.current = 'committing'
            pause_hook.pause_at(installs.root, CHECKPOINT_PREFIX + COMMIT)
            log.done()
        except BaseException as e:
            _fail(steps, driver, e)
    return version, changed


def _run_steps(steps, installs, journal, venv, version, adopted,
               console_script, supervisor, driver, program_link,
               trove_config_dir):
    changed = not adopted
    if not adopted:
        marker = os.path.join(venv, install.MARKER)
        steps.begin('marker', 'writing the install marker %s' % marker,
                    marker)
        # Whatever is there (a FIFO would block the open) is replaced.
        guest_files.write_text(marker, _marker_text(version))
        path = installs.path(version)
        # A leftover of an interrupted install is kept until the commit.
        steps.begin('version-link', 'linking %s to %s' % (path, venv), path,
                    replace_dir=True)
        point_link(path, venv)
        steps.begin('current', 'pointing %s at %s'
                    % (installs.current_link, version), installs.current_link)
        installs.switch(version)
    steps.begin('journal', 'recording %s as the last known good version'
                % version, journal.path)
    with journal.update() as data:
        if data['last_known_good'] is None:
            data['last_known_good'] = version
    program = os.path.join(installs.current_link, 'bin', console_script)
    if program_link and os.path.lexists(program_link):
        steps.begin('program-link', 'pointing %s at %s'
                    % (program_link, program), program_link)
        changed = point_link(program_link, program) or changed
    if driver is not None:
        if isinstance(driver, init_system.SystemdDriver):
            drop_in = driver.drop_in_path()
            steps.begin(DROP_IN_STEP, 'writing the systemd drop-in %s'
                        % drop_in, drop_in)
            driver.point_at(program)
        steps.begin('pid', "recording the guest agent's pid in %s"
                    % supervisor.pidfile, supervisor.pidfile)
        supervisor.adopt()
    if trove_config_dir:
        managed = os.path.join(trove_config_dir, trove_guest.MANAGED_FILE)
        steps.begin('trove-config', 'enabling the RPC ping in %s' % managed,
                    managed)
        trove_guest.write_managed_config(trove_config_dir)
    return changed
