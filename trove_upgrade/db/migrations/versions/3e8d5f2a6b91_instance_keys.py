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
