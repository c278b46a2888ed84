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

"""Console entry points.

The services, and the commands that load oslo.messaging, select
oslo.service's threading backend by importing
:mod:`trove_upgrade.common.threading_backend` first; the other commands start
no backend. Every one of them gets the warning filters of
:mod:`trove_upgrade.common.warning_filters` from here.
"""

from trove_upgrade.common import warning_filters  # noqa: F401
