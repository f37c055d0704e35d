"""pull request heads, so that an approval binds to the head it was written against

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('pull_heads',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('repo', sa.String(length=200), nullable=False),
    sa.Column('pr_number', sa.Integer(), nullable=False),
    sa.Column('sha', sa.String(length=64), nullable=False),
    sa.Column('since', sa.DateTime(timezone=True), nullable=False),
    sa.Column('seen', sa.Boolean(), nullable=False),
    sa.Column('event', sa.String(length=20), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('repo', 'pr_number', 'sha', 'since', 'seen', name='uq_pull_heads')
    )
    op.create_index('ix_pull_heads_pr', 'pull_heads', ['repo', 'pr_number'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_pull_heads_pr', table_name='pull_heads')
    op.drop_table('pull_heads')
