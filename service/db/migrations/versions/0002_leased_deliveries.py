"""deliveries take the outbox's leased-row columns

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01

The inbox and the outbox now share one helper for rows a worker takes, tries and finishes or
retries, so deliveries get the outbox's columns: `processed_at` becomes `done_at`, and
`locked_until` (the lease of the worker trying it) and `last_error` are added.
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("UPDATE deliveries SET next_attempt_at = received_at WHERE next_attempt_at IS NULL")
    op.drop_index('ix_deliveries_processed_at', table_name='deliveries')
    with op.batch_alter_table('deliveries') as batch:
        batch.alter_column('processed_at', new_column_name='done_at')
        batch.alter_column('next_attempt_at', existing_type=sa.DateTime(timezone=True), nullable=False)
        batch.add_column(sa.Column('locked_until', sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column('last_error', sa.Text(), nullable=True))
    op.create_index('ix_deliveries_done_at', 'deliveries', ['done_at'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_deliveries_done_at', table_name='deliveries')
    with op.batch_alter_table('deliveries') as batch:
        batch.drop_column('last_error')
        batch.drop_column('locked_until')
        batch.alter_column('next_attempt_at', existing_type=sa.DateTime(timezone=True), nullable=True)
        batch.alter_column('done_at', new_column_name='processed_at')
    op.create_index('ix_deliveries_processed_at', 'deliveries', ['processed_at'], unique=False)
