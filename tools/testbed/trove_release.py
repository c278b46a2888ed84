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

"""Real OpenStack Trove releases from PyPI, installed once and reused.

Installing ``trove`` takes about a minute, so the virtualenvs are built once
per machine in a cache directory that outlives test runs and CI clones
(``TROVE_UPGRADE_TEST_CACHE``, by default ``~/.cache/trove-upgrade-tests``).
A virtualenv is built under a file lock, so concurrent test workers build
it once, and is used only once a marker says it is whole. Trove still runs
on eventlet: its programs are only ever run as processes of their own,
never imported here.
"""

import contextlib
import fcntl
import os
import shutil
import subprocess
import sys

RELEASES = ('25.1.0', '26.0.0')


# Fixed when the module is imported: tests point HOME at temporary
# directories, and a cache found through them would be rebuilt every time.
_CACHE = os.environ.get('TROVE_UPGRADE_TEST_CACHE') or os.path.join(
    os.path.expanduser('~'), '.cache', 'trove-upgrade-tests')


def cache_dir():
    os.makedirs(_CACHE, exist_ok=True)
    return _CACHE


@contextlib.contextmanager
def _locked(name):
    with open(os.path.join(cache_dir(), name + '.lock'), 'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def trove_venv(version):
    """The path of a virtualenv with ``trove==version`` installed.

    A virtualenv cannot be moved (its scripts name their own path), so it is
    built in place and a marker written last says it is whole; one without
    the marker, left by a killed run, is removed and built again.
    """
    name = 'trove-%s-venv' % version
    path = os.path.join(cache_dir(), name)
    marker = os.path.join(path, '.complete')
    with _locked(name):
        if os.path.exists(marker):
            return path
        shutil.rmtree(path, ignore_errors=True)
        subprocess.run([sys.executable, '-m', 'venv', path], check=True)
        subprocess.run(
            [os.path.join(path, 'bin', 'pip'), 'install', '-q',
             '--disable-pip-version-check', 'trove==%s' % version],
            check=True)
        with open(marker, 'w') as done:
            done.write(version)
            done.flush()
            os.fsync(done.fileno())
    return path
