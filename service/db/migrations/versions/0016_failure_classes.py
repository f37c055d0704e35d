"""classified test failures and the flaky tests known per repository and backend (reserved: filled in by the change that needs it)

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-07
"""
from __future__ import annotations


revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
