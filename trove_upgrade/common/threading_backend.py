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

"""Importing this selects oslo.service's threading backend.

The services (``trove-upgrade-api``, ``-conductor``, ``-agent`` and the
WSGI application) import it before anything imports oslo.service or
oslo.messaging: this project never uses eventlet. So do ``-status`` and
``-adopt``, which serve nothing but import oslo.messaging, whose package
loads ``oslo_service.service`` and with it a backend (eventlet, unless one
was selected). ``trove-upgrade-package`` and ``-manage`` load neither and
start no backend.
"""

from trove_upgrade.common import warning_filters  # noqa: F401,I100

from oslo_service import backend  # noqa: E402

backend.init_backend(backend.BackendType.THREADING)
