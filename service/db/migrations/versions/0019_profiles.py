"""profiles: a job that profiles its changed rows (`/test profile`), and the artifacts a
runner uploads for a job (the profile's traces, gzip), kept with the job

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = '0019'
down_revision = '0018'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('jobs') as batch:
        batch.add_column(
            sa.Column('profile', sa.Boolean, nullable=False, server_default=sa.false())
        )
    op.create_table(
        'job_artifacts',
        sa.Column('id', sa.Integer, primary_key=True),
        sa.Column(
            'job_id', sa.Integer, sa.ForeignKey('jobs.id', ondelete='CASCADE'), nullable=False
        ),
        sa.Column('name', sa.String(200), nullable=False),
        sa.Column('data', sa.LargeBinary, nullable=False),
        sa.Column('size', sa.Integer, nullable=False),
        sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint('job_id', 'name', name='uq_job_artifacts_name'),
    )


def downgrade() -> None:
    op.drop_table('job_artifacts')
    with op.batch_alter_table('jobs') as batch:
        batch.drop_column('profile')
