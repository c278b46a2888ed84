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

"""What the demo, the benchmarks and the functional tests set up alike.

A Trove guest's layout and its agent under supervisord
(:mod:`tools.testbed.guest`), Trove releases from PyPI
(:mod:`tools.testbed.trove_release`), a sample guest agent
(:mod:`tools.testbed.sample_guest`), a fleet of conductors and simulated
agents (:mod:`tools.testbed.fleet`) and configuration files
(:mod:`tools.testbed.conffile`). ``tools/demo.sh`` runs it in the
virtualenv it builds, so it needs only what trove-upgrade's server and agent
extras install. Its resources follow the fixtures protocol without the
library (:mod:`tools.testbed.lifecycle`): tests use them as fixtures.
"""
