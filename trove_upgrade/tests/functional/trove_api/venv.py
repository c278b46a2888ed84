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

"""A cached virtualenv of a Trove release with trove-upgrade installed.

Built beside the plain Trove virtualenvs of ``trove_release`` (never
inside them), under the same lock discipline: Trove is installed once,
then trove-upgrade from this checkout, non-editable, with its ``server``
extra (the API, conductor and trove-upgrade-manage), as an operator would
install it next to trove-api. trove-upgrade is installed again only when
its sources or this recipe changed since the last run: a digest of them
is kept beside the install.
"""

import configparser
import hashlib
import os
import shutil
import subprocess
import sys

from tools.testbed import trove_release

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))))
# What an install of the checkout is made of, and how it is made; tests
# are left out, since changing them changes nothing installed that the
# tests run.
_SOURCES = ('trove_upgrade', 'setup.cfg', 'setup.py', 'requirements.txt',
            os.path.relpath(__file__, REPO))


def source_digest(repo=REPO):
    digest = hashlib.sha256()
    for top in _SOURCES:
        path = os.path.join(repo, top)
        files = [path] if os.path.isfile(path) else sorted(
            os.path.join(root, name)
            for root, dirs, names in os.walk(path)
            if '__pycache__' not in root
            and os.sep + 'tests' not in root[len(path):]
            for name in names if not name.endswith('.pyc'))
        for name in files:
            digest.update(os.path.relpath(name, repo).encode() + b'\0')
            with open(name, 'rb') as f:
                digest.update(hashlib.sha256(f.read()).digest())
    return digest.hexdigest()


def _server_requirements():
    """The requirements of the ``server`` extra, as setup.cfg lists them."""
    setup = configparser.ConfigParser()
    setup.read(os.path.join(REPO, 'setup.cfg'))
    return [line.split('#')[0].strip()
            for line in setup['extras']['server'].splitlines()
            if line.split('#')[0].strip()]


def _pip(path, *args):
    subprocess.run([os.path.join(path, 'bin', 'pip'), 'install', '-q',
                    '--disable-pip-version-check'] + list(args),
                   check=True, cwd=REPO)


def _write(path, text):
    with open(path + '.tmp', 'w') as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + '.tmp', path)


def trove_upgrade_venv(version):
    """The path of a virtualenv with trove==version and trove-upgrade."""
    name = 'trove-api-%s+trove-upgrade' % version
    path = os.path.join(trove_release.cache_dir(), name)
    trove_marker = os.path.join(path, '.trove-complete')
    digest_file = os.path.join(path, '.trove-upgrade-digest')
    with trove_release._locked(name):
        if not os.path.exists(trove_marker):
            shutil.rmtree(path, ignore_errors=True)
            subprocess.run([sys.executable, '-m', 'venv', path], check=True)
            _pip(path, 'trove==%s' % version)
            _write(trove_marker, version)
        digest = source_digest()
        try:
            with open(digest_file) as f:
                installed = f.read()
        except FileNotFoundError:
            installed = None
        if installed != digest:
            # What Trove does not already bring, then the package itself.
            _pip(path, '-r', os.path.join(REPO, 'requirements.txt'),
                 *_server_requirements())
            _pip(path, '--no-deps', '--force-reinstall', REPO)
            _write(digest_file, digest)
    return path
