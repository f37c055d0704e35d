"""runners drained by their jobs' infrastructure errors: a runner's drain as it reported it
(since when, and each job that drained it with its step and error), for the dashboard

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-07
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('runners') as batch:
        batch.add_column(sa.Column('drained', sa.JSON, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('runners') as batch:
        batch.drop_column('drained')
