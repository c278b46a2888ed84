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

"""Commands that act on several ids, as ``openstack server delete`` does.

Each id is tried; each failure is logged with the API's message, and the
command fails at the end when any did, saying how many.
"""

import logging

from osc_lib import exceptions

LOG = logging.getLogger(__name__)


def for_each(ids, action, failure, summary):
    """Call ``action(id)`` for each of ``ids``.

    ``failure`` is logged with the id and the error of each one that
    failed; ``summary`` is the final error, with how many failed and of
    how many.
    """
    failures = 0
    for item in ids:
        try:
            action(item)
        except exceptions.CommandError as exc:
            failures += 1
            LOG.error(failure, item, exc)
    if failures:
        raise exceptions.CommandError(summary % (failures, len(ids)))
