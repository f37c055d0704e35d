"""a runner can be removed (an ephemeral runner deregisters after its one job): its token no
longer authenticates and it is not listed, while its jobs keep its name

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('runners') as batch:
        batch.add_column(sa.Column('removed_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('runners') as batch:
        batch.drop_column('removed_at')
