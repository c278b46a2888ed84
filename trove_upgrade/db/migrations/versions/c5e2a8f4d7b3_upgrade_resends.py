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

"""When to cast an unclaimed upgrade to its agent again, and how often it was.

Upgrades recorded before this revision have no ``resend_at``: the
conductor never sends them again, as before, and ``[conductor]
upgrade_timeout`` ends those their agents never got.

Revision ID: c5e2a8f4d7b3
Revises: 9b6f3d2c8e41
Create Date: 2026-12-01 16:00:00
"""

from alembic import op
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

revision = 'c5e2a8f4d7b3'
down_revision = '9b6f3d2c8e41'
branch_labels = None
depends_on = None

DateTime = sa.DateTime().with_variant(mysql.DATETIME(fsp=6), 'mysql',
                                      'mariadb')


def upgrade():
    op.add_column('upgrades', sa.Column('resend_at', DateTime))
    op.add_column('upgrades', sa.Column('send_count', sa.Integer,
                                        nullable=False, server_default='0'))
