"""Upgrades held DEFERRED by the control plane, not sent yet.

Revision ID: 9d3f6b2c8a17
Revises: 3e8d5f2a6b91
Create Date: 2026-12-01 13:00:00
"""

from alembic import op
import sqlalchemy as sa

revision = '9d3f6b2c8a17'
down_revision = '3e8d5f2a6b91'
branch_labels = None
depends_on = None


def upgrade():
    op.add_column('upgrades', sa.Column('held', sa.Boolean, nullable=False,
                                        server_default=sa.false()))
