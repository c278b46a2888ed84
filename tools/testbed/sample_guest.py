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

"""Build wheels of a small sample guest agent, at any version and behaviour.

The agent tests, the benchmark and the demo upgrade this distribution
instead of Trove's real guest agent: it installs in a second, starts in a
fraction of one, and each build can be told how to misbehave.

Behaviours:

``ok``
    starts, writes ``<state-dir>/status.json`` and runs until SIGTERM.
``crash``
    exits with status 3 as soon as it starts.
``unhealthy``
    starts and keeps running, but its health command fails.
``broken``
    its health command fails even before the switch, in the preflight
    check of the new install.
``flooding``
    starts and keeps running, but its health command, once the guest
    agent runs, prints without end and forks a helper that holds its
    output open (recording the helper's pid in
    ``<state-dir>/flood-helper-<pid>.pid``).

The wheel carries two console scripts: ``sample-guest-agent --state-dir
DIR`` and ``sample-guest-agent-health --state-dir DIR``. The health command
follows the agent's protocol: ``TROVE_UPGRADE_PHASE=preflight`` checks the
install alone, ``running`` checks the process recorded in the status file.

Wheels are written directly with ``zipfile`` so that building one needs no
build backend and no network.
"""

import base64
import hashlib
import os
import zipfile

DIST = 'sample_guest_agent'
BEHAVIOURS = ('ok', 'crash', 'unhealthy', 'broken', 'flooding')
FLOOD_HELPER_GLOB = 'flood-helper-*.pid'

_MODULE = '''"""Sample guest agent built by trove_upgrade's tests."""

import argparse
import json
import os
import signal
import subprocess
import sys
import time

__version__ = {version!r}
BEHAVIOUR = {behaviour!r}


def _status_path(state_dir):
    return os.path.join(state_dir, 'status.json')


def _args():
    parser = argparse.ArgumentParser()
    parser.add_argument('--state-dir', required=True)
    return parser.parse_args()


def main():
    args = _args()
    if BEHAVIOUR == 'crash':
        sys.stderr.write('sample guest agent %s: crashing at start\\n'
                         % __version__)
        sys.exit(3)
    os.makedirs(args.state_dir, exist_ok=True)
    path = _status_path(args.state_dir)
    tmp = path + '.tmp'
    with open(tmp, 'w') as f:
        json.dump({{'pid': os.getpid(), 'version': __version__,
                   'behaviour': BEHAVIOUR}}, f)
    os.replace(tmp, path)

    def _stop(signum, frame):
        sys.exit(0)

    signal.signal(signal.SIGTERM, _stop)
    while True:
        time.sleep(3600)


def _flood(state_dir):
    helper = subprocess.Popen([sys.executable, '-c',
                               'import time; time.sleep(3600)'])
    name = 'flood-helper-%d.pid' % helper.pid
    with open(os.path.join(state_dir, name), 'w') as f:
        f.write(str(helper.pid))
    chunk = b'\\x1b[2Jflooding\\x00' * 4096
    while True:
        os.write(1, chunk)


def health():
    args = _args()
    if BEHAVIOUR == 'broken':
        sys.stderr.write('sample guest agent %s: broken install\\n'
                         % __version__)
        return 1
    if os.environ.get('TROVE_UPGRADE_PHASE') == 'preflight':
        return 0
    if BEHAVIOUR == 'flooding':
        _flood(args.state_dir)
    try:
        with open(_status_path(args.state_dir)) as f:
            status = json.load(f)
        os.kill(status['pid'], 0)
    except (OSError, ValueError, KeyError) as e:
        sys.stderr.write('no running sample guest agent: %s\\n' % e)
        return 1
    if status['version'] != __version__:
        sys.stderr.write('running version %s, not %s\\n'
                         % (status['version'], __version__))
        return 1
    if BEHAVIOUR == 'unhealthy':
        sys.stderr.write('sample guest agent %s: unhealthy\\n' % __version__)
        return 1
    return 0
'''


def _record_hash(data):
    digest = hashlib.sha256(data).digest()
    return 'sha256=' + base64.urlsafe_b64encode(digest).decode().rstrip('=')


def wheel_name(version):
    return '%s-%s-py3-none-any.whl' % (DIST, version)


def build_wheel(dest_dir, version, behaviour='ok', padding=0):
    """Write the sample guest agent wheel into ``dest_dir``; return its path.

    ``padding`` adds a data file of that many random (incompressible)
    bytes, to make packages of a given size for the benchmark.
    """
    if behaviour not in BEHAVIOURS:
        raise ValueError('unknown behaviour %r, expected one of %s'
                         % (behaviour, ', '.join(BEHAVIOURS)))
    info = '%s-%s.dist-info' % (DIST, version)
    files = [
        ('%s/__init__.py' % DIST,
         _MODULE.format(version=version, behaviour=behaviour).encode()),
        ('%s/METADATA' % info,
         ('Metadata-Version: 2.1\nName: %s\nVersion: %s\n'
          'Summary: Sample guest agent (%s)\n' % (DIST, version, behaviour)
          ).encode()),
        ('%s/WHEEL' % info,
         b'Wheel-Version: 1.0\nGenerator: trove-upgrade-tests\n'
         b'Root-Is-Purelib: true\nTag: py3-none-any\n'),
        ('%s/entry_points.txt' % info,
         ('[console_scripts]\n'
          'sample-guest-agent = %s:main\n'
          'sample-guest-agent-health = %s:health\n' % (DIST, DIST)).encode()),
        ('%s/top_level.txt' % info, ('%s\n' % DIST).encode()),
    ]
    os.makedirs(dest_dir, exist_ok=True)
    path = os.path.join(dest_dir, wheel_name(version))
    record = ['%s,%s,%d' % (name, _record_hash(data), len(data))
              for name, data in files]
    with zipfile.ZipFile(path, 'w', zipfile.ZIP_DEFLATED) as zf:
        for name, data in files:
            zf.writestr(name, data)
        if padding:
            name = '%s/padding.bin' % DIST
            sha = hashlib.sha256()
            with zf.open(zipfile.ZipInfo(name), 'w',
                         force_zip64=True) as out:
                left = padding
                while left:
                    chunk = os.urandom(min(left, 1 << 20))
                    sha.update(chunk)
                    out.write(chunk)
                    left -= len(chunk)
            digest = base64.urlsafe_b64encode(sha.digest()).decode()
            record.append('%s,sha256=%s,%d'
                          % (name, digest.rstrip('='), padding))
        record.append('%s/RECORD,,' % info)
        zf.writestr('%s/RECORD' % info, '\n'.join(record) + '\n')
    return path


def guest_command(state_dir):
    """The ``[agent] guest_command`` that runs the sample guest agent."""
    return 'bin/sample-guest-agent --state-dir %s' % state_dir


def health_command(state_dir):
    """The health command of the sample guest agent."""
    return 'bin/sample-guest-agent-health --state-dir %s' % state_dir
