"""What the trend pages read of the store: a repository's operators with default-branch
history, one operator's points with what ran their commits, its pull requests' own runs and
its open regression issue, and whether a repository is private. Each a query over a session;
`trend_views.py` turns the rows into what the pages show."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from service.db.models import MAIN_TRIGGERS, HistoryPoint, Job, MainRun, RegressionIssue
from service.queue.queries import private_repos
from service.web.trend_views import CommitRun, IssueRow, PullRun, Recorded, pull_run

POINTS_READ = 10_000  # an operator's newest points read for its page
PULL_JOBS = 100  # its newest pull-request jobs read to stand beside them
PULL_TRIGGER = "pull_request"


def private(session: Session, repo: str) -> bool:
    """Whether `repo` is private, as any of its jobs or default-branch runs recorded."""
    job = select(Job.id).where(Job.repo == repo, Job.private.is_(True)).limit(1)
    run = select(MainRun.id).where(MainRun.repo == repo, MainRun.private.is_(True)).limit(1)
    return session.scalars(job).first() is not None or session.scalars(run).first() is not None


def has_history(session: Session, repo: str, op: str, backend: str) -> bool:
    query = select(HistoryPoint.id).filter_by(repo=repo, op=op, backend=backend).limit(1)
    return session.scalars(query).first() is not None


@dataclass(frozen=True)
class OperatorHistory:
    """One operator and backend of a repository with default-branch history."""

    op: str
    backend: str
    rows: int  # its series (dtype × shape × metric)
    commits: int
    last_at: datetime
    issue_number: int | None  # its open regression issue's, where GitHub made it
    issue_open: bool


def operators(session: Session, repo: str) -> list[OperatorHistory]:
    """`repo`'s operators with history, by operator then backend."""
    series = func.count(
        func.distinct(HistoryPoint.dtype + "|" + HistoryPoint.shape + "|" + HistoryPoint.metric)
    )
    query = (
        select(
            HistoryPoint.op,
            HistoryPoint.backend,
            series,
            func.count(func.distinct(HistoryPoint.sha)),
            func.max(HistoryPoint.created_at),
        )
        .where(HistoryPoint.repo == repo)
        .group_by(HistoryPoint.op, HistoryPoint.backend)
        .order_by(HistoryPoint.op, HistoryPoint.backend)
    )
    issues = {
        (i.op, i.backend): i
        for i in session.scalars(select(RegressionIssue).filter_by(repo=repo, state="open"))
    }
    out = []
    for op, backend, rows, commits, last_at in session.execute(query):
        issue = issues.get((op, backend))
        number = issue.issue_number if issue is not None else None
        out.append(OperatorHistory(op, backend, rows, commits, last_at, number, issue is not None))
    return out


def public_operators(session: Session) -> dict[str, list[tuple[str, str]]]:
    """Every public repository's operators and backends with history, for the dashboard. Read
    from the default branch's jobs, each (repository, operator, backend) checked for a point:
    the jobs are few (retention keeps each one's newest), the history is not, and the
    dashboard reads this at every refresh."""
    kept = (
        select(HistoryPoint.id)
        .where(
            HistoryPoint.repo == Job.repo,
            HistoryPoint.op == Job.op,
            HistoryPoint.backend == Job.backend,
        )
        .exists()
    )
    query = (
        select(Job.repo, Job.op, Job.backend)
        .where(Job.trigger.in_(MAIN_TRIGGERS), kept)
        .distinct()
        .order_by(Job.repo, Job.op, Job.backend)
    )
    found: dict[str, list[tuple[str, str]]] = {}
    for repo, op, backend in session.execute(query):
        found.setdefault(repo, []).append((op, backend))
    hidden = private_repos(session, set(found))
    return {repo: ops for repo, ops in found.items() if repo not in hidden}


@dataclass(frozen=True)
class OperatorData:
    """What one operator's page is drawn from."""

    records: list[Recorded]
    runs: dict[str, CommitRun]  # what ran each commit (its first run)
    pulls: list[PullRun]
    issue_rows: list[IssueRow]
    issue_number: int | None
    issue_open: bool


def operator_data(session: Session, repo: str, op: str, backend: str) -> OperatorData:
    """An operator's newest points, what ran their commits, its pull requests' newest runs
    that timed something, and its open regression issue's rows."""
    key = {"repo": repo, "op": op, "backend": backend}
    rows = session.scalars(
        select(HistoryPoint).filter_by(**key).order_by(HistoryPoint.id.desc()).limit(POINTS_READ)
    ).all()
    records = [_recorded(row) for row in reversed(rows)]
    job_ids = {r.job_id for r in records}
    runs: dict[str, CommitRun] = {}
    if job_ids:
        query = (
            select(Job.sha, MainRun.trigger, MainRun.pull_number)
            .join(MainRun, MainRun.id == Job.main_run_id)
            .where(Job.id.in_(job_ids))
            .order_by(MainRun.id)
        )
        for sha, trigger, pull_number in session.execute(query):
            runs.setdefault(sha, CommitRun(trigger, pull_number))
    jobs = session.scalars(
        select(Job)
        .filter_by(**key)
        .where(Job.trigger == PULL_TRIGGER, Job.result.is_not(None))
        .order_by(Job.id.desc())
        .limit(PULL_JOBS)
    ).all()
    pulls = [run for run in map(pull_run, jobs) if run is not None]
    issue = session.scalars(select(RegressionIssue).filter_by(**key, state="open")).first()
    issue_rows = [_issue_row(row) for row in (issue.rows if issue is not None else [])]
    return OperatorData(
        records,
        runs,
        pulls,
        [row for row in issue_rows if row is not None],
        issue.issue_number if issue is not None else None,
        issue is not None,
    )


def _recorded(row: HistoryPoint) -> Recorded:
    return Recorded(
        id=row.id, dtype=row.dtype, shape=row.shape, metric=row.metric, sha=row.sha,
        base_sha=row.base_sha, job_id=row.job_id, rounds=row.rounds, ratio=row.ratio,
        low=row.low, high=row.high, value=row.value, verdict=row.verdict, mark=row.mark,
        created_at=row.created_at,
    )  # fmt: skip


def _issue_row(row: object) -> IssueRow | None:
    """An issue's row as stored (JSON written by the history's recorder), or None where it
    lacks what the page needs."""
    if not isinstance(row, dict):
        return None
    try:
        return IssueRow(
            dtype=str(row["dtype"]), shape=str(row["shape"]), metric=str(row["metric"]),
            kind=str(row.get("kind") or "slower"), start_id=int(row["start_id"]),
            found_at=str(row.get("found_at") or ""),
            recovered_at=str(row["recovered_at"]) if row.get("recovered_at") else None,
        )  # fmt: skip
    except (KeyError, TypeError, ValueError):
        return None
