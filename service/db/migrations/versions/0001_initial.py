"""initial schema

Revision ID: 0001
Revises: (none)
Create Date: 2026-11-30
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('deliveries',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('delivery_id', sa.String(length=100), nullable=False),
    sa.Column('event', sa.String(length=100), nullable=False),
    sa.Column('action', sa.String(length=100), nullable=True),
    sa.Column('payload', sa.JSON(), nullable=True),
    sa.Column('received_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('processed_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('outcome', sa.Text(), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('delivery_id')
    )
    op.create_index(op.f('ix_deliveries_processed_at'), 'deliveries', ['processed_at'], unique=False)
    op.create_table('outbox',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=20), nullable=False),
    sa.Column('key', sa.String(length=300), nullable=False),
    sa.Column('dedupe_key', sa.String(length=300), nullable=True),
    sa.Column('payload', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('locked_until', sa.DateTime(timezone=True), nullable=True),
    sa.Column('done_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('outcome', sa.Text(), nullable=True),
    sa.Column('last_error', sa.Text(), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('dedupe_key')
    )
    op.create_index(op.f('ix_outbox_key'), 'outbox', ['key'], unique=False)
    op.create_index('ix_outbox_pending', 'outbox', ['done_at', 'next_attempt_at'], unique=False)
    op.create_table('result_comments',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('repo', sa.String(length=200), nullable=False),
    sa.Column('pr_number', sa.Integer(), nullable=False),
    sa.Column('op', sa.String(length=64), nullable=False),
    sa.Column('backend', sa.String(length=64), nullable=False),
    sa.Column('github_comment_id', sa.BigInteger(), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('repo', 'pr_number', 'op', 'backend', name='uq_result_comments')
    )
    op.create_table('runners',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('backends', sa.JSON(), nullable=False),
    sa.Column('labels', sa.JSON(), nullable=False),
    sa.Column('slots', sa.Integer(), nullable=False),
    sa.Column('version', sa.String(length=100), nullable=True),
    sa.Column('healthy', sa.Boolean(), nullable=False),
    sa.Column('health_reason', sa.Text(), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_seen_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('token_hash')
    )
    op.create_table('jobs',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('repo', sa.String(length=200), nullable=False),
    sa.Column('clone_url', sa.Text(), nullable=False),
    sa.Column('pr_number', sa.Integer(), nullable=False),
    sa.Column('sha', sa.String(length=64), nullable=False),
    sa.Column('base_ref', sa.String(length=255), nullable=True),
    sa.Column('base_sha', sa.String(length=64), nullable=True),
    sa.Column('op', sa.String(length=64), nullable=False),
    sa.Column('backend', sa.String(length=64), nullable=False),
    sa.Column('bench', sa.Boolean(), nullable=False),
    sa.Column('compare', sa.Boolean(), nullable=False),
    sa.Column('status', sa.String(length=20), nullable=False),
    sa.Column('attempt', sa.Integer(), nullable=False),
    sa.Column('requested_by', sa.String(length=200), nullable=True),
    sa.Column('command_comment_id', sa.BigInteger(), nullable=True),
    sa.Column('runner_id', sa.Integer(), nullable=True),
    sa.Column('runner_name', sa.String(length=200), nullable=True),
    sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('cancel_requested', sa.Boolean(), nullable=False),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('result', sa.JSON(), nullable=True),
    sa.Column('log_size', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['runner_id'], ['runners.id'], ),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_index('ix_jobs_pr', 'jobs', ['repo', 'pr_number'], unique=False)
    op.create_index('ix_jobs_queue', 'jobs', ['status', 'backend', 'id'], unique=False)
    op.create_index('uq_jobs_active', 'jobs', ['repo', 'pr_number', 'sha', 'op', 'backend'], unique=True, sqlite_where=sa.text("status IN ('queued', 'running')"), postgresql_where=sa.text("status IN ('queued', 'running')"))
    op.create_table('log_chunks',
    sa.Column('id', sa.Integer(), nullable=False),
    sa.Column('job_id', sa.Integer(), nullable=False),
    sa.Column('offset', sa.Integer(), nullable=False),
    sa.Column('data', sa.LargeBinary(), nullable=False),
    sa.ForeignKeyConstraint(['job_id'], ['jobs.id'], ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('job_id', 'offset', name='uq_log_chunks_offset')
    )


def downgrade() -> None:
    op.drop_table('log_chunks')
    op.drop_index('uq_jobs_active', table_name='jobs', sqlite_where=sa.text("status IN ('queued', 'running')"), postgresql_where=sa.text("status IN ('queued', 'running')"))
    op.drop_index('ix_jobs_queue', table_name='jobs')
    op.drop_index('ix_jobs_pr', table_name='jobs')
    op.drop_table('jobs')
    op.drop_table('runners')
    op.drop_table('result_comments')
    op.drop_index('ix_outbox_pending', table_name='outbox')
    op.drop_index(op.f('ix_outbox_key'), table_name='outbox')
    op.drop_table('outbox')
    op.drop_index(op.f('ix_deliveries_processed_at'), table_name='deliveries')
    op.drop_table('deliveries')
