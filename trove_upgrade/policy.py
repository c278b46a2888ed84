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

"""Policy enforcement: the rules are in ``trove_upgrade.policies``."""

import time

from oslo_config import cfg
from oslo_log import log as logging
from oslo_policy import policy

from trove_upgrade.common import exception
from trove_upgrade import policies

LOG = logging.getLogger(__name__)

_ENFORCER = None

# Seconds between two looks for a changed policy file.
LOOK_INTERVAL = 1.0


class Enforcer(policy.Enforcer):
    """oslo.policy's enforcer, looking for policy file changes once a second.

    oslo.policy looks for the policy file and ``policy_dirs`` on every
    check: without a policy file it searches every configuration directory
    for one each time, a file system search per request. Here it looks
    at most once every ``LOOK_INTERVAL`` seconds, so that a policy file
    created, changed or removed takes effect within a second, as an
    operator expects, without a search per request.

    A policy file that stops parsing once rules are loaded leaves them in
    force, with an error logged: an edit in progress or a typo must not
    turn every request into an error, nor open or close the API.
    """

    def __init__(self, *args, timer=time.monotonic, **kwargs):
        super().__init__(*args, **kwargs)
        self._timer = timer
        self._looked_at = None

    def load_rules(self, force_reload=False):
        now = self._timer()
        if (not force_reload and self._looked_at is not None
                and now - self._looked_at < LOOK_INTERVAL):
            return
        try:
            super().load_rules(force_reload)
        except ValueError as e:
            if not self.rules:
                raise
            # oslo.policy reads a changed file again only once it changes
            # again, so this is logged once per broken version.
            LOG.error('The policy file %(path)s cannot be parsed, the '
                      'rules loaded before stay in force: %(reason)s',
                      {'path': self.policy_path,
                       'reason': _one_line(e)})
        # After the load: one that raised is tried again by the next check.
        self._looked_at = now


def _one_line(error):
    """oslo.policy's YAML or JSON error spans several lines."""
    return ' '.join(str(error).split())


def init(conf):
    """Build the enforcer from ``conf``; each API application calls it."""
    global _ENFORCER
    enforcer = Enforcer(conf)
    enforcer.register_defaults(policies.list_rules())
    try:
        enforcer.load_rules()
    except ValueError as e:
        # oslo.policy's YAML or JSON error: several lines, no file name.
        raise exception.InvalidPolicyFileError(
            path=conf.oslo_policy.policy_file, reason=_one_line(e))
    _ENFORCER = enforcer
    return enforcer


def get_enforcer():
    """The ``oslo.policy.enforcer`` entry point of the oslopolicy tools."""
    cfg.CONF([], project='trove-upgrade')
    return init(cfg.CONF)


def authorize(context, rule, target=None):
    """Raise PolicyNotAuthorizedError (403) unless ``context`` passes ``rule``.

    The management API is not owned by a project, so the default target is
    the caller's own project.
    """
    if target is None:
        target = {'project_id': context.project_id,
                  'user_id': context.user_id}
    try:
        return _ENFORCER.authorize(rule, target, context, do_raise=True,
                                   exc=exception.PolicyNotAuthorizedError,
                                   action=rule)
    except policy.InvalidScope:
        raise exception.PolicyNotAuthorizedError(action=rule)
