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

"""Per-instance keys sealing RPC messages.

Revision ID: 3e8d5f2a6b91
Revises: 7c4e1a9b2d60
Create Date: 2026-11-29 19:25:00
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

revision = '3e8d5f2a6b91'
down_revision = '7c4e1a9b2d60'
branch_labels = None
depends_on = None

DateTime = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql',
                                      'mariadb')
TABLE_ARGS = {'mysql_engine': 'InnoDB', 'mysql_charset': 'utf8mb4'}


def upgrade():
    op.create_table(
        'instance_keys',
        sa.Column('key_id', sa.String(32), primary_key=True),
        sa.Column('instance_id', sa.String(36), nullable=False),
        sa.Column('key_material', sa.String(255), nullable=False),
        sa.Column('wrapped', sa.Boolean, nullable=False),
        sa.Column('created_at', DateTime, nullable=False),
        sa.Column('expires_at', DateTime),
        **TABLE_ARGS)
    op.create_index('instance_keys_instance_id_idx', 'instance_keys',
                    ['instance_id'])
