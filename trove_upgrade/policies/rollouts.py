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

"""Policies guarding /v1.0/{tenant_id}/mgmt/rollouts."""

from trove_upgrade.policies import base

PREFIX = 'trove_upgrade:rollouts:%s'
CREATE = PREFIX % 'create'
LIST = PREFIX % 'list'
SHOW = PREFIX % 'show'
PAUSE = PREFIX % 'pause'
RESUME = PREFIX % 'resume'
ABORT = PREFIX % 'abort'
DELETE = PREFIX % 'delete'

_COLLECTION = '/v1.0/{tenant_id}/mgmt/rollouts'
_ROLLOUT = _COLLECTION + '/{rollout_id}'


_rule = base.admin_rule

rules = [
    _rule(CREATE, 'Create a rollout of a version to a group of agents.',
          'POST', _COLLECTION),
    _rule(LIST, 'List rollouts.', 'GET', _COLLECTION),
    _rule(SHOW, 'Show a rollout with its counters and agents.', 'GET',
          _ROLLOUT),
    _rule(PAUSE, 'Pause a rollout: nothing new is dispatched.', 'POST',
          _ROLLOUT + '/pause'),
    _rule(RESUME, 'Resume a paused rollout, acknowledging its failures.',
          'POST', _ROLLOUT + '/resume'),
    _rule(ABORT, 'Abort a rollout and cancel its unstarted upgrades.',
          'POST', _ROLLOUT + '/abort'),
    _rule(DELETE, 'Delete a completed or aborted rollout.', 'DELETE',
          _ROLLOUT),
]


def list_rules():
    return rules
