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

"""The conductor's lines about refused messages, so many a minute at most.

Anyone who can publish on the bus can send forged messages, each refused
with a WARNING naming its instance: a flood would fill the disk and bury
the rest of the log. oslo.log's own limit
(``oslo_log.rate_limit.install_filter``) is one budget for every logger of
the process, so a flood of refusals would drop the conductor's other lines
with them; this one limits the refusals only, and says how many it left
out.
"""

import threading
import time

# Lines about refusals per window, and the window in seconds.
BURST = 20
INTERVAL = 60


class RateLimitedLog:
    """``warning()`` on ``logger``, at most ``burst`` per ``interval``."""

    def __init__(self, logger, burst=BURST, interval=INTERVAL,
                 timer=time.monotonic):
        self._logger = logger
        self._burst = burst
        self._interval = interval
        self._timer = timer
        self._lock = threading.Lock()
        self._window_end = None
        self._logged = 0
        self._left_out = 0

    def warning(self, message, *args):
        now = self._timer()
        with self._lock:
            left_out = 0
            if self._window_end is None or now >= self._window_end:
                left_out, self._left_out = self._left_out, 0
                self._window_end = now + self._interval
                self._logged = 0
            log = self._logged < self._burst
            if log:
                self._logged += 1
            else:
                self._left_out += 1
        if left_out:
            self._logger.warning('%d more refused messages were not logged '
                                 'in %d seconds', left_out, self._interval)
        if log:
            self._logger.warning(message, *args)
