"""exact base: a job that compares with a named commit (`/test ... vs REF`: a release, any
commit) rather than with the merge base of its head and the base branch

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-07
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(
            sa.Column('exact_base', sa.Boolean, nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.drop_column('exact_base')
