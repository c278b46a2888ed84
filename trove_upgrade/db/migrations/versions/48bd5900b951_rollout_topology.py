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

"""A rollout's choice of following Trove's replication sets and clusters.

Additive: rollouts recorded before this revision follow the topology and
hold a set whose member failed, the defaults.

Revision ID: 48bd5900b951
Revises: c5e2a8f4d7b3
Create Date: 2026-12-07 18:40:00
"""

from alembic import op
import sqlalchemy as sa

revision = '48bd5900b951'
down_revision = 'c5e2a8f4d7b3'
branch_labels = None
depends_on = None


def upgrade():
    op.add_column('rollouts', sa.Column('order_by_topology', sa.Boolean,
                                        nullable=False,
                                        server_default=sa.true()))
    op.add_column('rollouts', sa.Column('hold_set_on_failure', sa.Boolean,
                                        nullable=False,
                                        server_default=sa.true()))
