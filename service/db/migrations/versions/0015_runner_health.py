"""runners drained by their jobs' infrastructure errors (reserved: filled in by the change that needs it)

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-07
"""
from __future__ import annotations


revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
