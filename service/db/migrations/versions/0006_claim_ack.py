"""a claimed job records its runner's first heartbeat: a claim never acknowledged is no attempt

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(sa.Column('acked_at', sa.DateTime(timezone=True), nullable=True))
    # Jobs running during the upgrade were started by live runners.
    op.execute("UPDATE jobs SET acked_at = started_at WHERE status = 'running'")


def downgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.drop_column('acked_at')
