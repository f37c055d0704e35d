"""a running job keeps the progress its runner streams and when its comment may next show it;
a job run as a GitHub App keeps the id of its check run

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(sa.Column('progress', sa.JSON(), nullable=True))
        batch.add_column(
            sa.Column('progress_noticed_at', sa.DateTime(timezone=True), nullable=True)
        )
        batch.add_column(sa.Column('check_run_id', sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.drop_column('check_run_id')
        batch.drop_column('progress_noticed_at')
        batch.drop_column('progress')
