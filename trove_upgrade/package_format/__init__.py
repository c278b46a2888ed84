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

"""Signed, encrypted upgrade packages: format, build and verification.

A package is an encrypted payload plus a signed manifest that travels beside
it as ``<location>.manifest``. Operators produce both with the
``trove-upgrade-package`` command
(:mod:`trove_upgrade.package_format.build`); the agent checks them with
:mod:`trove_upgrade.package_format.verify`, which documents
its single entry point. ``doc/source/reference/package-format.rst`` specifies
the format and ``threat-model.rst`` the attacks it defeats.
"""
