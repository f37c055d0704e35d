"""the aggregate check run of each tested head (reserved: filled in by the change that needs it)

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-07
"""
from __future__ import annotations


revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
