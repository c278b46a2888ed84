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

"""Every RPC API version of every release, in one place.

``RELEASE_MAPPING`` maps a release to the RPC API version each side of the
project speaks in it: ``agent`` is the guest-side upgrade agent's API
(``trove_upgrade.services.agent_rpcapi``), ``conductor`` the conductor's API
(``trove_upgrade.common.conductor_rpcapi``). ``master`` is what the code in
this tree speaks; a unit test fails when it drifts from the ``RPC_API_VERSION``
of either rpcapi module. When a release is cut, its name is added with the
versions ``master`` had, so that operators can pin ``[upgrade_levels]`` to
it while the fleet still runs that release.
"""

import re

from trove_upgrade.common import exception

RELEASE_MAPPING = {
    '2026.2': {
        'agent': '1.0',
        'conductor': '1.0',
    },
    'master': {
        'agent': '1.3',
        'conductor': '1.4',
    },
}

LATEST = 'latest'
AUTO = 'auto'

_VERSION_RE = re.compile(r'^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$')


def is_version(value):
    """True for an ``x.y`` RPC API version."""
    return bool(_VERSION_RE.match(value))


def version_key(version):
    """Sort key of an ``x.y`` version: 1.10 comes after 1.9."""
    major, minor = version.split('.')
    return int(major), int(minor)


def resolve_version_cap(service, value, auto=None):
    """The RPC version cap an ``[upgrade_levels]`` value stands for.

    ``latest`` is no cap (None); a release name caps to that release's
    version of ``service``; an ``x.y`` value is the cap itself, and may not
    exceed what this code speaks (``2026.1`` looks like a version, but is
    a release this code does not know); ``auto`` is whatever ``auto()``
    returns, for a service whose peers report their versions. Anything
    else raises ``InvalidRPCVersionCapError``.
    """
    if value == LATEST:
        return None
    if value == AUTO and auto is not None:
        return auto()
    if value in RELEASE_MAPPING:
        return RELEASE_MAPPING[value][service]
    if not is_version(value):
        raise exception.InvalidRPCVersionCapError(service=service, value=value)
    newest = RELEASE_MAPPING['master'][service]
    if version_key(value) > version_key(newest):
        raise exception.InvalidRPCVersionCapError(
            '[upgrade_levels] %s = %s is above %s, the newest %s RPC API '
            'version this code knows; a release name must be one of %s.'
            % (service, value, newest, service,
               ', '.join(sorted(RELEASE_MAPPING))),
            service=service, value=value)
    return value
