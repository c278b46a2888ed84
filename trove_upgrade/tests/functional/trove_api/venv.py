"""A cached virtualenv of a Trove release with trove-upgrade installed.

Built beside the plain Trove virtualenvs of ``trove_release`` (never
inside them), under the same lock discipline: Trove is installed once,
then trove-upgrade from this checkout, non-editable, as an operator would
install it next to trove-api. trove-upgrade is installed again only when
its sources changed since the last run: a digest of them is kept beside
the install.
"""

import hashlib
import os
import shutil
import subprocess
import sys

from trove_upgrade.tests.functional import trove_release

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__))))))
# What an install of the checkout is made of; tests are left out, since
# changing them changes nothing installed that the tests run.
_SOURCES = ('trove_upgrade', 'setup.cfg', 'setup.py', 'requirements.txt')


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
            _pip(path, '-r', os.path.join(REPO, 'requirements.txt'))
            _pip(path, '--no-deps', '--force-reinstall', REPO)
            _write(digest_file, digest)
    return path
