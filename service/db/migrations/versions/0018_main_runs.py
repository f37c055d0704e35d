"""the default branch's own runs: what started a job (`trigger`) and its main run, the runs
(a push, a night), the nightly schedule's state, each row's history on the default branch and
the one open regression issue per repository, operator and backend

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

OPEN_SQL = "state = 'open'"


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(
            sa.Column("trigger", sa.String(20), nullable=False, server_default="pull_request")
        )
        batch.add_column(sa.Column("main_run_id", sa.Integer, nullable=True))
    op.create_table(
        "main_runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("key", sa.String(100), nullable=False),
        sa.Column("trigger", sa.String(20), nullable=False),
        sa.Column("sha", sa.String(64), nullable=False),
        sa.Column("before_sha", sa.String(64), nullable=True),
        sa.Column("pull_number", sa.Integer, nullable=True),
        sa.Column("pusher", sa.String(200), nullable=True),
        sa.Column("clone_url", sa.Text, nullable=False),
        sa.Column("private", sa.Boolean, nullable=False),
        sa.Column("default_branch", sa.String(255), nullable=False),
        sa.Column("alerts", sa.JSON, nullable=False),
        sa.Column("drift_window", sa.Integer, nullable=False),
        sa.Column("outcome", sa.Text, nullable=True),
        sa.Column("settled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("repo", "key", name="uq_main_runs"),
    )
    op.create_table(
        "main_schedules",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("repo", sa.String(200), nullable=False, unique=True),
        sa.Column("clone_url", sa.Text, nullable=False),
        sa.Column("private", sa.Boolean, nullable=False),
        sa.Column("default_branch", sa.String(255), nullable=False),
        sa.Column("nightly", sa.String(10), nullable=False),
        sa.Column("last_night", sa.String(10), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "history_points",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("op", sa.String(64), nullable=False),
        sa.Column("backend", sa.String(64), nullable=False),
        sa.Column("dtype", sa.String(32), nullable=False),
        sa.Column("shape", sa.String(200), nullable=False),
        sa.Column("metric", sa.String(8), nullable=False),
        sa.Column("sha", sa.String(64), nullable=False),
        sa.Column("base_sha", sa.String(64), nullable=False),
        sa.Column("job_id", sa.Integer, nullable=False),
        sa.Column("rounds", sa.Integer, nullable=False),
        sa.Column("ratio", sa.Float, nullable=False),
        sa.Column("low", sa.Float, nullable=True),
        sa.Column("high", sa.Float, nullable=True),
        sa.Column("kernel_ms", sa.Float, nullable=True),
        sa.Column("threshold", sa.Float, nullable=False),
        sa.Column("verdict", sa.String(16), nullable=False),
        sa.Column("mark", sa.String(16), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint(
            "repo",
            "op",
            "backend",
            "dtype",
            "shape",
            "metric",
            "sha",
            "base_sha",
            name="uq_history_points",
        ),
    )
    op.create_index(
        "ix_history_series",
        "history_points",
        ["repo", "op", "backend", "dtype", "shape", "metric", "id"],
    )
    op.create_index("ix_history_points_job", "history_points", ["job_id"])
    op.create_table(
        "regression_issues",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("repo", sa.String(200), nullable=False),
        sa.Column("op", sa.String(64), nullable=False),
        sa.Column("backend", sa.String(64), nullable=False),
        sa.Column("state", sa.String(10), nullable=False),
        sa.Column("rows", sa.JSON, nullable=False),
        sa.Column("issue_number", sa.BigInteger, nullable=True),
        sa.Column("sent_digest", sa.String(64), nullable=True),
        sa.Column("opened_job_id", sa.Integer, nullable=False),
        sa.Column("closed_job_id", sa.Integer, nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index(
        "uq_regression_issues_open",
        "regression_issues",
        ["repo", "op", "backend"],
        unique=True,
        sqlite_where=sa.text(OPEN_SQL),
        postgresql_where=sa.text(OPEN_SQL),
    )


def downgrade() -> None:
    op.drop_index("uq_regression_issues_open", table_name="regression_issues")
    op.drop_table("regression_issues")
    op.drop_index("ix_history_points_job", table_name="history_points")
    op.drop_index("ix_history_series", table_name="history_points")
    op.drop_table("history_points")
    op.drop_table("main_schedules")
    op.drop_table("main_runs")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("main_run_id")
        batch.drop_column("trigger")
