"""head checks: the one aggregate check run (`ondemand`) of each tested head, so that branch
protection and merge queues can require one check whatever operators a change runs

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-07
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        'head_checks',
        sa.Column('id', sa.Integer, primary_key=True),
        sa.Column('repo', sa.String(200), nullable=False),
        sa.Column('sha', sa.String(64), nullable=False),
        sa.Column('idle_reason', sa.String(200), nullable=True),
        sa.Column('check_run_id', sa.BigInteger, nullable=True),
        sa.Column('check_sent_digest', sa.String(64), nullable=True),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint('repo', 'sha', name='uq_head_checks'),
    )


def downgrade() -> None:
    op.drop_table('head_checks')
