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

"""Initial schema: upgrades, their events, and agents.

Revision ID: 5a2b7c9d1e3f
Revises:
Create Date: 2026-11-29 18:00:00
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

revision = '5a2b7c9d1e3f'
down_revision = None
branch_labels = None
depends_on = None

# Microseconds on MySQL/MariaDB keep events recorded within a second in
# order; the other databases keep them already.
DateTime = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql',
                                      'mariadb')
# MEDIUMTEXT on MySQL/MariaDB: their TEXT holds only 64 KiB.
Text = sa.Text().with_variant(mysql.MEDIUMTEXT(), 'mysql', 'mariadb')
TABLE_ARGS = {'mysql_engine': 'InnoDB', 'mysql_charset': 'utf8mb4'}


def upgrade():
    op.create_table(
        'upgrades',
        sa.Column('id', sa.String(36), primary_key=True),
        sa.Column('instance_id', sa.String(36), nullable=False),
        sa.Column('instance_version', sa.String(255), nullable=False),
        sa.Column('from_version', sa.String(255)),
        sa.Column('strategy', sa.String(64), nullable=False),
        sa.Column('location', sa.String(2048), nullable=False),
        sa.Column('metadata', Text, nullable=False),
        sa.Column('allow_downgrade', sa.Boolean, nullable=False),
        sa.Column('status', sa.String(32), nullable=False),
        sa.Column('status_detail', Text),
        sa.Column('project_id', sa.String(255)),
        sa.Column('user_id', sa.String(255)),
        sa.Column('request_id', sa.String(255)),
        sa.Column('rollout_id', sa.String(36)),
        sa.Column('created_at', DateTime, nullable=False),
        sa.Column('updated_at', DateTime),
        sa.Column('finished_at', DateTime),
        **TABLE_ARGS)
    op.create_index('upgrades_instance_id_idx', 'upgrades', ['instance_id'])
    op.create_index('upgrades_status_idx', 'upgrades', ['status'])
    op.create_index('upgrades_rollout_id_idx', 'upgrades', ['rollout_id'])
    op.create_index('upgrades_created_at_idx', 'upgrades', ['created_at'])

    op.create_table(
        'upgrade_events',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('upgrade_id', sa.String(36),
                  sa.ForeignKey('upgrades.id',
                                name='upgrade_events_upgrade_id_fkey'),
                  nullable=False),
        sa.Column('created_at', DateTime, nullable=False),
        sa.Column('source', sa.String(32), nullable=False),
        sa.Column('from_state', sa.String(32)),
        sa.Column('to_state', sa.String(32), nullable=False),
        sa.Column('detail', Text),
        sa.Column('request_id', sa.String(255)),
        **TABLE_ARGS)
    op.create_index('upgrade_events_upgrade_id_idx', 'upgrade_events',
                    ['upgrade_id'])

    op.create_table(
        'agents',
        sa.Column('instance_id', sa.String(36), primary_key=True),
        sa.Column('agent_version', sa.String(255)),
        sa.Column('guest_version', sa.String(255)),
        sa.Column('rpc_api_version', sa.String(16)),
        sa.Column('state', sa.String(32)),
        sa.Column('labels', Text, nullable=False),
        sa.Column('host', sa.String(255)),
        sa.Column('created_at', DateTime, nullable=False),
        sa.Column('updated_at', DateTime),
        sa.Column('last_heartbeat_at', DateTime),
        **TABLE_ARGS)
