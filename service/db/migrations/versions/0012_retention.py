"""retention: a job whose log was pruned says when, and the pruner's queries have indexes
(finished jobs by age, those with a stored log by age, a target's jobs by id)

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-08
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None

LOGGED = sa.text('log_size > 0')


def upgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(sa.Column('log_pruned_at', sa.DateTime(timezone=True), nullable=True))
    op.create_index('ix_jobs_finished', 'jobs', ['finished_at'])
    op.create_index(
        'ix_jobs_logged', 'jobs', ['finished_at'], sqlite_where=LOGGED, postgresql_where=LOGGED
    )
    op.create_index('ix_jobs_target', 'jobs', ['repo', 'op', 'backend', 'id'])


def downgrade() -> None:
    op.drop_index('ix_jobs_target', table_name='jobs')
    op.drop_index('ix_jobs_logged', table_name='jobs')
    op.drop_index('ix_jobs_finished', table_name='jobs')
    with op.batch_alter_table('jobs') as batch:
        batch.drop_column('log_pruned_at')
