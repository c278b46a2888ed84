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

"""Things a testbed starts, with the clean-ups that stop them.

The protocol of the ``fixtures`` library (``setUp``, ``cleanUp``,
``addCleanup``, ``getDetails``, a ``_setUp`` to override, a context
manager) on the standard library's :class:`contextlib.ExitStack`: the
demo's virtualenv has no test libraries, and a test's ``useFixture`` takes
a resource as it is.
"""

import contextlib


class Resource:
    """Set up by :meth:`setUp`; :meth:`cleanUp` undoes it, last step first.

    A set-up that fails undoes what it had done before raising.
    """

    def setUp(self):
        self._cleanups = contextlib.ExitStack()
        try:
            self._setUp()
        except BaseException:
            self.cleanUp()
            raise

    def _setUp(self):
        """Start the resource; register with :meth:`addCleanup`."""

    def addCleanup(self, function, *args, **kwargs):
        self._cleanups.callback(function, *args, **kwargs)

    def cleanUp(self):
        self._cleanups.close()

    def getDetails(self):
        """What a failing test attaches: nothing (the protocol's method)."""
        return {}

    def __enter__(self):
        self.setUp()
        return self

    def __exit__(self, *exc_info):
        self.cleanUp()
