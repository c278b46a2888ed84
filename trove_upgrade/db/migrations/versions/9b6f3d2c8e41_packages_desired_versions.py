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

"""Registered packages and desired versions.

Revision ID: 9b6f3d2c8e41
Revises: 9d3f6b2c8a17
Create Date: 2026-12-01 12:45:00
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

revision = '9b6f3d2c8e41'
down_revision = '9d3f6b2c8a17'
branch_labels = None
depends_on = None

DateTime = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql',
                                      'mariadb')
Text = sa.Text().with_variant(mysql.MEDIUMTEXT(), 'mysql', 'mariadb')
TABLE_ARGS = {'mysql_engine': 'InnoDB', 'mysql_charset': 'utf8mb4'}


def upgrade():
    op.create_table(
        'packages',
        sa.Column('id', sa.String(36), primary_key=True),
        sa.Column('name', sa.String(255), nullable=False),
        sa.Column('version', sa.String(64), nullable=False),
        sa.Column('strategy', sa.String(64), nullable=False),
        sa.Column('location', sa.String(2048), nullable=False),
        sa.Column('state', sa.String(32), nullable=False),
        sa.Column('size', sa.BigInteger, nullable=False),
        sa.Column('sha256', sa.String(64), nullable=False),
        sa.Column('min_upgrade_from', sa.String(64)),
        sa.Column('signer_key_ids', sa.String(1024), nullable=False),
        sa.Column('manifest_created_at', DateTime, nullable=False),
        sa.Column('manifest_expires_at', DateTime, nullable=False),
        sa.Column('project_id', sa.String(255)),
        sa.Column('user_id', sa.String(255)),
        sa.Column('created_at', DateTime, nullable=False),
        sa.Column('updated_at', DateTime),
        sa.UniqueConstraint('name', 'version',
                            name='uniq_packages0name0version'),
        **TABLE_ARGS)

    op.create_table(
        'desired_versions',
        sa.Column('id', sa.String(36), primary_key=True),
        sa.Column('name', sa.String(255), nullable=False),
        sa.Column('package_name', sa.String(255), nullable=False),
        sa.Column('version', sa.String(64), nullable=False),
        sa.Column('selector', Text, nullable=False),
        sa.Column('canary', sa.Integer, nullable=False),
        sa.Column('max_in_flight', sa.Integer, nullable=False),
        sa.Column('max_in_flight_kind', sa.String(16), nullable=False),
        sa.Column('max_failures', sa.Integer, nullable=False),
        sa.Column('max_failures_kind', sa.String(16), nullable=False),
        sa.Column('per_agent_retries', sa.Integer, nullable=False),
        sa.Column('agent_deadline', sa.Integer, nullable=False),
        sa.Column('status', sa.String(32), nullable=False),
        sa.Column('status_detail', Text),
        sa.Column('failures_acknowledged', sa.Integer, nullable=False),
        sa.Column('lease_owner', sa.String(255)),
        sa.Column('lease_until', DateTime),
        sa.Column('project_id', sa.String(255)),
        sa.Column('user_id', sa.String(255)),
        sa.Column('created_at', DateTime, nullable=False),
        sa.Column('updated_at', DateTime),
        **TABLE_ARGS)

    op.create_table(
        'desired_version_events',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('desired_version_id', sa.String(36), nullable=False),
        sa.Column('created_at', DateTime, nullable=False),
        sa.Column('action', sa.String(32), nullable=False),
        sa.Column('detail', Text),
        sa.Column('source', sa.String(32), nullable=False),
        sa.Column('user_id', sa.String(255)),
        sa.Column('project_id', sa.String(255)),
        sa.Column('request_id', sa.String(255)),
        **TABLE_ARGS)
    op.create_index('desired_version_events_desired_version_id_idx',
                    'desired_version_events', ['desired_version_id'])

    op.create_table(
        'desired_version_dispatches',
        sa.Column('id', sa.Integer, primary_key=True, autoincrement=True),
        sa.Column('desired_version_id', sa.String(36),
                  sa.ForeignKey('desired_versions.id',
                                name='desired_version_dispatches_dv_id_fkey'),
                  nullable=False),
        sa.Column('instance_id', sa.String(36), nullable=False),
        sa.Column('round', sa.Integer, nullable=False),
        sa.Column('attempt', sa.Integer, nullable=False),
        sa.Column('canary', sa.Boolean, nullable=False),
        sa.Column('upgrade_id', sa.String(36),
                  sa.ForeignKey(
                      'upgrades.id',
                      name='desired_version_dispatches_upgrade_id_fkey'),
                  nullable=False),
        sa.Column('created_at', DateTime, nullable=False),
        sa.UniqueConstraint(
            'desired_version_id', 'instance_id', 'round', 'attempt',
            name='uniq_desired_version_dispatches0dv0instance0round0attempt'),
        **TABLE_ARGS)
    op.create_index('desired_version_dispatches_instance_id_idx',
                    'desired_version_dispatches', ['instance_id'])
