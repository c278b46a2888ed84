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

"""Which ConfigOpts trove-upgrade's options live on.

A trove-upgrade service owns its process, and so oslo.config's global
CONF. The Trove API extension runs inside ``trove-api``, whose global CONF
is Trove's: there trove-upgrade takes a ConfigOpts of its own, parsed from
its own file, so that its ``[database]``, transport, exchange and policy
never mix with Trove's, nor change Trove's defaults.

This module imports nothing of trove-upgrade, so a host can choose before
``trove_upgrade.conf`` binds ``CONF``.
"""

import sys

from oslo_config import cfg

_PRIVATE = None


def use_private_conf():
    """Give trove-upgrade a ConfigOpts of its own and return it.

    Must run before ``trove_upgrade.conf`` is imported: modules bind its
    ``CONF`` as they are imported.
    """
    global _PRIVATE
    if _PRIVATE is None:
        loaded = sys.modules.get('trove_upgrade.conf')
        if loaded is not None:
            raise RuntimeError(
                'trove_upgrade.conf was imported before a private '
                'configuration was asked for; its options are already on '
                'the global CONF.')
        _PRIVATE = cfg.ConfigOpts()
    return _PRIVATE


def is_private():
    """Whether trove-upgrade runs hosted, on a ConfigOpts of its own."""
    return _PRIVATE is not None


def conf():
    """The ConfigOpts of trove-upgrade: its own when hosted, else global."""
    return _PRIVATE if _PRIVATE is not None else cfg.CONF
