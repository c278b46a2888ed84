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

"""What every functional strategy test sets up: its own dirs and settings."""

import os

import fixtures

from trove_upgrade.agent import strategies
from trove_upgrade.tests import base
from trove_upgrade.tests.functional import servers


class StrategyTestCase(base.TestCase):
    """One strategy against a real server, in temp dirs of its own.

    A subclass names its ``strategy``; ``download_retries`` and
    ``download_timeout`` are the ``[agent]`` values of its tests. Each test
    downloads into ``self.dest`` in the otherwise empty ``self.dest_dir``,
    and :meth:`_strategy` loads the strategy with ``self.settings`` as its
    drop-in file.
    """

    strategy = None
    download_retries = 1
    download_timeout = 30
    dest_name = 'pkg.tar'

    @classmethod
    def class_dir(cls, files=()):
        """A temp dir for the class's server holding ``files`` (name, data)."""
        workdir = fixtures.TempDir()
        workdir.setUp()
        cls.addClassCleanup(workdir.cleanUp)
        for name, data in files:
            with open(os.path.join(workdir.path, name), 'wb') as f:
                f.write(data)
        return workdir.path

    def setUp(self):
        super().setUp()
        self.config_dir = self.useFixture(fixtures.TempDir()).path
        self.dest_dir = self.useFixture(fixtures.TempDir()).path
        self.dest = os.path.join(self.dest_dir, self.dest_name)
        self.flags(group='agent', strategy_config_dir=self.config_dir,
                   download_retries=self.download_retries,
                   download_retry_delay=0,
                   download_timeout=self.download_timeout)
        self.settings = {}

    def _strategy(self, **settings):
        self.settings.update(settings)
        self._write_settings()
        return strategies.load(self.strategy, self.conf)

    def _write_settings(self):
        servers.write_strategy_conf(self.config_dir, self.strategy,
                                    self.settings)

    def _read_dest(self):
        with open(self.dest, 'rb') as f:
            return f.read()
