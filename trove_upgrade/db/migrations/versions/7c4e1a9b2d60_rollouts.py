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

"""Rollouts and the dispatches they made.

Revision ID: 7c4e1a9b2d60
Revises: 5a2b7c9d1e3f
Create Date: 2026-11-29 18:40:00
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

revision = '7c4e1a9b2d60'
down_revision = '5a2b7c9d1e3f'
branch_labels = None
depends_on = None

DateTime = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql',
                                      'mariadb')
Text = sa.Text().with_variant(mysql.MEDIUMTEXT(), 'mysql', 'mariadb')
TABLE_ARGS = {'mysql_engine': 'InnoDB', 'mysql_charset': 'utf8mb4'}


def upgrade():
    op.create_table(
        'rollouts',
        sa.Column('id', sa.String(36), primary_key=True),
        sa.Column('name', sa.String(255), nullable=False),
        sa.Column('instance_version', sa.String(255), nullable=False),
        sa.Column('strategy', sa.String(64), nullable=False),
        sa.Column('location', sa.String(2048), nullable=False),
        sa.Column('selector', Text, nullable=False),
        sa.Column('canary', sa.Integer, nullable=False),
        sa.Column('max_in_flight', sa.Integer, nullable=False),
        sa.Column('max_in_flight_kind', sa.String(16), nullable=False),
        sa.Column('max_failures', sa.Integer, nullable=False),
        sa.Column('max_failures_kind', sa.String(16), nullable=False),
        sa.Column('per_agent_retries', sa.Integer, nullable=False),
        sa.Column('agent_deadline', sa.Integer, nullable=False),
        sa.Column('start_at', DateTime),
        sa.Column('status', sa.String(32), nullable=False),
        sa.Column('status_detail', Text),
        sa.Column('failures_acknowledged', sa.Integer, nullable=False),
        sa.Column('lease_owner', sa.String(255)),
        sa.Column('lease_until', DateTime),
        sa.Column('project_id', sa.String(255)),
        sa.Column('user_id', sa.String(255)),
        sa.Column('created_at', DateTime, nullable=False),
        sa.Column('updated_at', DateTime),
        sa.Column('finished_at', DateTime),
        **TABLE_ARGS)
    op.create_index('rollouts_status_idx', 'rollouts', ['status'])

    op.create_table(
        'rollout_dispatches',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('rollout_id', sa.String(36),
                  sa.ForeignKey('rollouts.id',
                                name='rollout_dispatches_rollout_id_fkey'),
                  nullable=False),
        sa.Column('instance_id', sa.String(36), nullable=False),
        sa.Column('attempt', sa.Integer, nullable=False),
        sa.Column('canary', sa.Boolean, nullable=False),
        sa.Column('upgrade_id', sa.String(36),
                  sa.ForeignKey('upgrades.id',
                                name='rollout_dispatches_upgrade_id_fkey'),
                  nullable=False),
        sa.Column('created_at', DateTime, nullable=False),
        sa.UniqueConstraint(
            'rollout_id', 'instance_id', 'attempt',
            name='uniq_rollout_dispatches0rollout_id0instance_id0attempt'),
        **TABLE_ARGS)
    op.create_index('rollout_dispatches_instance_id_idx',
                    'rollout_dispatches', ['instance_id'])
