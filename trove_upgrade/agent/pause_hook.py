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

"""The crash tests' hook: stop at a named step until killed.

When the environment variable ``TROVE_UPGRADE_AGENT_TEST_PAUSE`` names a
checkpoint, the process writes ``<root>/test-paused-at-<checkpoint>`` (its
pid) on reaching it and then sleeps until killed, so that a test can
``kill -9`` it at a known step. The agent's upgrade steps
(:mod:`trove_upgrade.agent.pipeline`) and adoption's
(:mod:`trove_upgrade.agent.adopt`) are checkpoints; nothing sets the
variable outside the tests.
"""

import os
import time

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

ENV = 'TROVE_UPGRADE_AGENT_TEST_PAUSE'
MARKER_PREFIX = 'test-paused-at-'


def pause_at(root, name):
    """Sleep for ever at checkpoint ``name`` when the tests ask to."""
    if os.environ.get(ENV) != name:
        return
    with open(os.path.join(root, MARKER_PREFIX + name), 'w') as f:
        f.write('%d\n' % os.getpid())
    LOG.warning('Test hook: paused at %s until killed', name)
    while True:
        time.sleep(3600)


def pause_once(root, name):
    """:func:`pause_at`, once per root, where the variable names ``name``.

    For the self-upgrade's hand-over, whose next process (a watcher
    started again, the agent restarted by its service manager) inherits
    the variable and must carry on past the checkpoint where its
    predecessor was killed. The variable may name several checkpoints,
    separated by commas, each reached once.
    """
    if name not in os.environ.get(ENV, '').split(','):
        return
    done = os.path.join(root, MARKER_PREFIX + 'once-' + name)
    if os.path.exists(done):
        return
    with open(done, 'w') as f:
        f.write('%d\n' % os.getpid())
    with open(os.path.join(root, MARKER_PREFIX + name), 'w') as f:
        f.write('%d\n' % os.getpid())
    LOG.warning('Test hook: paused at %s until killed', name)
    while True:
        time.sleep(3600)
