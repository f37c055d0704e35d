"""a delivery or outbox item GitHub refused for a permission the App lacks waits for it
(`waiting_for`, e.g. `contents:read`) instead of being given up

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-05
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    for table in ('deliveries', 'outbox'):
        with op.batch_alter_table(table) as batch:
            batch.add_column(sa.Column('waiting_for', sa.String(100), nullable=True))


def downgrade() -> None:
    for table in ('deliveries', 'outbox'):
        with op.batch_alter_table(table) as batch:
            batch.drop_column('waiting_for')
