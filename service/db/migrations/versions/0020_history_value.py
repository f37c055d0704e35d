"""history_value: a history point's timing is `value`, milliseconds a call for a device
point and microseconds of host time for a host one (it was `kernel_ms`, whatever the unit)

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07
"""
from __future__ import annotations

from alembic import op


revision = '0020'
down_revision = '0019'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('history_points') as batch:
        batch.alter_column('kernel_ms', new_column_name='value')


def downgrade() -> None:
    with op.batch_alter_table('history_points') as batch:
        batch.alter_column('value', new_column_name='kernel_ms')
