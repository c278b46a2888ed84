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

"""What a conductor remembers of the upgrades it moved, to spare reads.

``db.transitions`` takes it as ``memory``: it calls ``get`` and
``remember``.
"""

import threading

import cachetools


class UpgradeMemory:
    """The upgrades a process last recorded or read, most recent first.

    An upgrade only moves forward, so what was once its state stays
    true knowledge: a report that is a duplicate or stale against it is
    one against any later state too, and needs no database at all; a
    move from it is tried by compare-and-swap without reading the row
    first, and read as usual when the row has moved on meanwhile.
    Bounded to the ``size`` most recently used upgrades.
    """

    def __init__(self, size=10000):
        self._upgrades = cachetools.LRUCache(size)
        self._lock = threading.Lock()

    def get(self, upgrade_id):
        with self._lock:
            upgrade = self._upgrades.get(upgrade_id)
        return None if upgrade is None else dict(upgrade)

    def remember(self, upgrade):
        with self._lock:
            self._upgrades[upgrade['id']] = dict(upgrade)
