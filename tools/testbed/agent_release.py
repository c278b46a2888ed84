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

"""Real builds of trove-upgrade itself, for the agent's self-upgrade.

A build is a wheel of this tree's ``trove_upgrade`` under a version of
the caller's choosing (pbr's ``PBR_VERSION``), beside the wheels of the
``agent`` extra's dependencies, collected once per machine into the
tests' cache (``trove_release.cache_dir``) and reused. A *broken* build is
the same tree whose ``trove-upgrade-agent`` exits at start, as a release
that cannot start would.
"""

import contextlib
import fcntl
import glob
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

from tools.testbed import trove_release

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

# Replaces the agent's entry point in a broken build: it imports (the
# install's check passes) and exits at once with status 3.
BROKEN_MAIN = (
    '\n\ndef main():\n'
    '    raise SystemExit("this build of trove-upgrade-agent cannot start")\n')


def _agent_requirements():
    """The ``agent`` extra's requirements, read from setup.cfg."""
    lines = []
    taking = False
    with open(os.path.join(REPOSITORY, 'setup.cfg')) as f:
        for line in f:
            if line.startswith('agent ='):
                taking = True
                continue
            if taking:
                if not line.startswith('    '):
                    break
                lines.append(line.split('#')[0].strip())
    with open(os.path.join(REPOSITORY, 'requirements.txt')) as f:
        lines += [line.split('#')[0].strip() for line in f
                  if line.split('#')[0].strip()]
    return sorted(set(lines))


@contextlib.contextmanager
def _locked(name):
    with open(os.path.join(trove_release.cache_dir(), name + '.lock'),
              'w') as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def dependency_wheels():
    """The directory of the wheels every build of the agent needs."""
    requirements = _agent_requirements()
    key = hashlib.sha256('\n'.join(
        requirements + [sys.version]).encode()).hexdigest()[:16]
    name = 'wheelhouse-trove-upgrade-agent-py%d.%d-%s' % (
        sys.version_info[0], sys.version_info[1], key)
    path = os.path.join(trove_release.cache_dir(), name)
    marker = os.path.join(path, '.complete')
    with _locked(name):
        if os.path.exists(marker):
            return path
        shutil.rmtree(path, ignore_errors=True)
        subprocess.run([sys.executable, '-m', 'pip', 'wheel', '-q',
                        '--disable-pip-version-check', '-w', path]
                       + requirements, check=True)
        with open(marker, 'w') as done:
            done.write('\n'.join(requirements))
    return path


def _source_copy(dest):
    """This tree's tracked files (as they are on disk) under ``dest``."""
    listed = subprocess.run(['git', '-C', REPOSITORY, 'ls-files', '-z'],
                            check=True, capture_output=True).stdout
    for name in listed.decode().split('\0'):
        if not name:
            continue
        source = os.path.join(REPOSITORY, name)
        if not os.path.isfile(source):
            continue
        target = os.path.join(dest, name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(source, target)


def agent_wheel(version, out_dir, broken=False):
    """Build this tree's wheel as ``version``; return its path."""
    os.makedirs(out_dir, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix='agent-build-') as tree:
        _source_copy(tree)
        if broken:
            with open(os.path.join(tree, 'trove_upgrade', 'cmd',
                                   'agent.py'), 'a') as f:
                f.write(BROKEN_MAIN)
        env = dict(os.environ, PBR_VERSION=version,
                   SKIP_GENERATE_AUTHORS='1', SKIP_WRITE_GIT_CHANGELOG='1',
                   SKIP_GENERATE_RENO='1')
        subprocess.run([sys.executable, '-m', 'pip', 'wheel', '-q',
                        '--no-deps', '--no-build-isolation',
                        '--disable-pip-version-check', '-w', out_dir, tree],
                       check=True, env=env, capture_output=True)
    found = glob.glob(os.path.join(
        out_dir, 'trove_upgrade-%s-*.whl' % version))
    if len(found) != 1:
        raise RuntimeError('building trove-upgrade %s made %s'
                           % (version, found))
    return found[0]


def build_wheels(version, out_dir, broken=False):
    """Every wheel of one build: trove-upgrade's and its dependencies'."""
    wheels = [agent_wheel(version, out_dir, broken=broken)]
    deps = dependency_wheels()
    wheels += sorted(glob.glob(os.path.join(deps, '*.whl')))
    return wheels
