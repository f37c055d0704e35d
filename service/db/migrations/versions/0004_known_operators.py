"""the operators each tested commit's tests know, as runners report them

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('known_operators',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('repo', sa.String(length=200), nullable=False),
    sa.Column('sha', sa.String(length=64), nullable=False),
    sa.Column('operators', sa.JSON(), nullable=False),
    sa.Column('reported_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('repo', 'sha', name='uq_known_operators')
    )
    op.create_index(op.f('ix_known_operators_reported_at'), 'known_operators', ['reported_at'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_known_operators_reported_at'), table_name='known_operators')
    op.drop_table('known_operators')
