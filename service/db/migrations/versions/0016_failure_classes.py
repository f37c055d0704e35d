"""the flaky tests known per repository and backend: each test a job's re-runs found flaky,
with its re-runs, their failures, when it was last seen and the jobs that saw it

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-07
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('flaky_tests',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('repo', sa.String(length=200), nullable=False),
    sa.Column('backend', sa.String(length=64), nullable=False),
    sa.Column('op', sa.String(length=64), nullable=False),
    sa.Column('test_id', sa.String(length=1000), nullable=False),
    sa.Column('flaky_jobs', sa.Integer(), nullable=False),
    sa.Column('reruns', sa.Integer(), nullable=False),
    sa.Column('rerun_failures', sa.Integer(), nullable=False),
    sa.Column('job_ids', sa.JSON(), nullable=False),
    sa.Column('first_seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('repo', 'backend', 'test_id', name='uq_flaky_tests')
    )
    op.create_index('ix_flaky_tests_seen', 'flaky_tests', ['repo', 'backend', 'last_seen_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_flaky_tests_seen', table_name='flaky_tests')
    op.drop_table('flaky_tests')
