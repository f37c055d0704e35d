"""a job keeps the repository's regression gate for its operator (threshold, gate: read from
the settings file on the base when the job was created) and who accepted its regression

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(sa.Column('threshold', sa.Float(), nullable=False, server_default='0.1'))
        batch.add_column(sa.Column('gate', sa.String(16), nullable=False, server_default='inform'))
        batch.add_column(sa.Column('accepted_by', sa.String(200), nullable=True))
        batch.add_column(sa.Column('accepted_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.drop_column('accepted_at')
        batch.drop_column('accepted_by')
        batch.drop_column('gate')
        batch.drop_column('threshold')
