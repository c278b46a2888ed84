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

"""The services of the previous release, run from its source.

A mixed-version test runs some processes from :data:`COMMIT`, the
previous release pinned in ``tools/previous_release.ini`` with the RPC
API versions it speaks, beside today's: its ``trove_upgrade`` tree,
taken from git, comes first on their ``PYTHONPATH``, and
``PYTHONSAFEPATH`` keeps the working directory (today's tree) off their
path, and off the path of the children they start. The installed
dependencies and entry points are today's, which the previous release
shares.
"""

import configparser
import os
import subprocess

import fixtures

import trove_upgrade

_REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(
    trove_upgrade.__file__)))

# The one place the previous release is named.
PINNED_FILE = os.path.join(_REPOSITORY, 'tools', 'previous_release.ini')


def _pinned():
    parser = configparser.ConfigParser()
    if not parser.read(PINNED_FILE):
        raise RuntimeError('%s is missing: it names the previous release'
                           % PINNED_FILE)
    return parser['previous_release']


_PINNED = _pinned()
COMMIT = _PINNED['commit']
AGENT_API = _PINNED['agent_api']
CONDUCTOR_API = _PINNED['conductor_api']
SCHEMA = _PINNED['schema']


class PreviousRelease(fixtures.Fixture):
    """The previous release's source in a temporary directory.

    :attr:`env` is the environment a process of it needs.
    """

    def _setUp(self):
        root = self.useFixture(fixtures.TempDir()).path
        try:
            archive = subprocess.run(
                ['git', '-C', _REPOSITORY, 'archive', COMMIT,
                 'trove_upgrade'], check=True, capture_output=True).stdout
        except (OSError, subprocess.CalledProcessError) as e:
            raise RuntimeError(
                'the previous release %s is not in the git history of %s '
                '(a shallow clone?): %s' % (COMMIT, _REPOSITORY,
                                            getattr(e, 'stderr', e)))
        subprocess.run(['tar', '-x', '-C', root], input=archive,
                       check=True)
        self.root = root
        self.env = {'PYTHONPATH': root, 'PYTHONSAFEPATH': '1'}
