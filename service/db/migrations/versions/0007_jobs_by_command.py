"""jobs are found by the command that created them: reprocessing a command creates only the
jobs it had not created

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-01
"""
from __future__ import annotations

from alembic import op


revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('ix_jobs_command', 'jobs', ['command_comment_id', 'op', 'backend'])


def downgrade() -> None:
    op.drop_index('ix_jobs_command', table_name='jobs')
