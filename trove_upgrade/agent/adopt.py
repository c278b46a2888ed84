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
adopts it.

Adoption is idempotent: adopting the install that is already current says
so and changes nothing. A directory that is not a virtualenv holding the
guest agent's console script is refused with the reason.
"""

import configparser
import glob
import os

from trove_upgrade.agent import guest_files
from trove_upgrade.agent import install
from trove_upgrade.agent import journal as journal_mod
from trove_upgrade import exception
from trove_upgrade.packaging import exceptions as package_exc

DEFAULT_VENV = '/opt/guest-agent-venv'


class AdoptionError(exception.TroveUpgradeException):
    """The install cannot be adopted; the message says why."""

    def __init__(self, message):
        super().__init__(guest_files.bounded(message))


def _dist_infos(venv):
    pattern = os.path.join(venv, 'lib', 'python*', 'site-packages',
                           '*.dist-info')
    return sorted(glob.glob(pattern))


def _read(dist_info, name):
    """A metadata file of ``dist_info``; None when absent or unreadable."""
    try:
        return guest_files.read_text(os.path.join(dist_info, name))
    except guest_files.UnreadableFile:
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

    Raises AdoptionError naming the first thing that does not match the
    layout of a Trove image. A distribution whose metadata cannot be read
    (not a file, not UTF-8, larger than ``guest_files.MAX_TEXT_FILE_SIZE``)
    declares nothing; the version it declares must name a directory.
    """
    venv = os.path.abspath(venv)
    if not os.path.isdir(venv):
        raise AdoptionError('%s does not exist or is not a directory'
                            % package_exc.quoted(venv))
    for needed in ('pyvenv.cfg', os.path.join('bin', 'python')):
        if not os.path.exists(os.path.join(venv, needed)):
            raise AdoptionError('%s is not a virtualenv: it has no %s'
                                % (package_exc.quoted(venv), needed))
    script = os.path.join(venv, 'bin', console_script)
    if not os.path.isfile(script) or not os.access(script, os.X_OK):
        raise AdoptionError('%s has no executable bin/%s: not a guest agent '
                            'install' % (package_exc.quoted(venv),
                                         console_script))
    for dist_info in _dist_infos(venv):
        if _declares(dist_info, console_script):
            version = _dist_version(dist_info)
            if version:
                try:
                    return install.check_version_name(version)
                except install.InstallError as e:
                    raise AdoptionError('%s declares %s: %s'
                                        % (dist_info, console_script, e))
    raise AdoptionError('no distribution in %s declares the console script '
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
    journal_mod.fsync_dir(os.path.dirname(link))
    return True


def adopt(installs, journal, venv, console_script, version=None,
          supervisor=None, program_link=None):
    """Adopt ``venv``; return ``(version, changed)``.

    ``version`` defaults to the version of the distribution providing
    ``console_script``. ``supervisor`` (a service-managed one) records the
    guest agent its service manager runs now, and points the service at
    ``current``; ``program_link``, when it exists, is pointed at
    ``current`` too.
    """
    venv = os.path.realpath(venv)
    found = inspect_venv(venv, console_script)
    version = install.check_version_name(version or found)
    path = installs.path(version)
    current = installs.current_version()
    with installs.lock:
        if current is not None:
            if current == version and os.path.realpath(path) == venv:
                changed = False
            else:
                raise AdoptionError(
                    'this install root already manages version %s (%s); '
                    'refusing to adopt %s as %s'
                    % (current, os.path.realpath(installs.path(current)),
                       venv, version))
        else:
            if os.path.lexists(path):
                install.remove_tree(path)
            # Whatever is there (a FIFO would block the open) is replaced.
            guest_files.write_text(os.path.join(venv, install.MARKER),
                                   '%s\nadopted\n' % version)
            os.symlink(venv, path)
            journal_mod.fsync_dir(installs.versions_dir)
            changed = True
    if changed:
        installs.switch(version)
    with journal.update() as data:
        if data['last_known_good'] is None:
            data['last_known_good'] = version
    program = os.path.join(installs.current_link, 'bin', console_script)
    if program_link and os.path.lexists(program_link):
        changed = point_link(program_link, program) or changed
    if supervisor is not None and hasattr(supervisor, 'driver'):
        supervisor.driver.point_at(program)
        supervisor.adopt()
    return version, changed
