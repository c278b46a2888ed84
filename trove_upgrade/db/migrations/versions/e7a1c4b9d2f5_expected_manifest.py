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

"""The manifest a package is bound to, and the one an upgrade expects.

Expand only: nullable columns the previous release neither reads nor
writes, so its API and conductor keep serving on this schema. Packages
registered before have no manifest hash, and upgrades created before or by
the previous release expect none: the agent takes any package of the
version for them, as before.

Revision ID: e7a1c4b9d2f5
Revises: 48bd5900b951
Create Date: 2026-12-07 21:40:00
"""

from alembic import op
import sqlalchemy as sa

revision = 'e7a1c4b9d2f5'
down_revision = '48bd5900b951'
branch_labels = None
depends_on = None
# trove_upgrade.db.migration: applied by ``trove-upgrade-manage db expand``.
phase = 'expand'


def upgrade():
    op.add_column('packages', sa.Column('manifest_sha256', sa.String(64)))
    op.add_column('packages', sa.Column('manifest_package', sa.String(255)))
    op.add_column('upgrades', sa.Column('expected_manifest_sha256',
                                        sa.String(64)))
    op.add_column('upgrades', sa.Column('expected_package', sa.String(255)))
    op.add_column('rollouts', sa.Column('expected_manifest_sha256',
                                        sa.String(64)))
    op.add_column('rollouts', sa.Column('expected_package', sa.String(255)))
