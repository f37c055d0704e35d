"""sent digests: a result comment and a check run remember what they last sent, so an update
that would change nothing costs no call of the hourly budget; a result comment, the job it
last showed

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-05
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('result_comments') as batch:
        batch.add_column(sa.Column('sent_digest', sa.String(64), nullable=True))
        batch.add_column(sa.Column('sent_job_id', sa.Integer, nullable=True))
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(sa.Column('check_sent_digest', sa.String(64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.drop_column('check_sent_digest')
    with op.batch_alter_table('result_comments') as batch:
        batch.drop_column('sent_job_id')
        batch.drop_column('sent_digest')
