"""What the dashboard shows, as plain data built from rows: the queue per backend, the runners
and their jobs (and why one is drained), the banner of permissions the App lacks, and the known
flaky tests. Pure functions, so the templates only lay them out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from report.markdown import plural
from service.db.models import Delivery, Job, OutboxItem, Runner
from service.github.installations import PermissionProblem
from service.github.permissions import find
from service.queue.flaky import FlakyRow
from service.web.job_page_views import waited


@dataclass(frozen=True)
class QueueRow:
    position: int
    job: Job | None  # None: a job of a private repository, counted but not shown
    waiting: str


@dataclass(frozen=True)
class BackendQueue:
    backend: str
    rows: list[QueueRow]
    runners_online: int
    oldest_wait: str


def queues(
    queued: Sequence[Job],
    backends: Sequence[str],
    online: Mapping[str, int],
    now: datetime,
) -> list[BackendQueue]:
    """Every known backend's queue in claim order (positions count private jobs too)."""
    by_backend: dict[str, list[Job]] = {b: [] for b in backends}
    for job in queued:
        by_backend.setdefault(job.backend, []).append(job)
    out = []
    for backend, jobs in by_backend.items():
        rows = [
            QueueRow(i, None if job.private else job, waited(job.created_at, now))
            for i, job in enumerate(jobs, 1)
        ]
        oldest = waited(jobs[0].created_at, now) if jobs else ""
        out.append(BackendQueue(backend, rows, online.get(backend, 0), oldest))
    return out


@dataclass(frozen=True)
class DrainedLine:
    """One job that drained a runner: its id, and its step and error where it is public
    (`public` False: a private repository's job, or one no longer kept)."""

    job_id: int
    public: bool
    step: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class RunnerRow:
    runner: Runner
    online: bool
    jobs: list[Job | None]  # None: a private repository's job
    elapsed: list[str] = field(default_factory=list)
    drained: list[DrainedLine] = field(default_factory=list)  # why it is drained
    drained_since: datetime | None = None


def drained_ids(runners: Sequence[Runner]) -> set[int]:
    """The jobs the runners' drains name (to read whether each is public)."""
    return {int(j["id"]) for r in runners for j in (r.drained or {}).get("jobs") or ()}


def runner_rows(
    runners: Sequence[Runner],
    running: Sequence[Job],
    online: Mapping[int, bool],
    now: datetime,
    named: Mapping[int, Job] | None = None,
) -> list[RunnerRow]:
    """The runners' rows; `named`: the jobs their drains name, by id (`drained_ids`)."""
    rows = []
    for runner in runners:
        mine = [j for j in running if j.runner_id == runner.id]
        drain = runner.drained or {}
        lines = []
        for item in drain.get("jobs") or ():
            job = (named or {}).get(int(item["id"]))
            public = job is not None and not job.private
            step, error = (item.get("step"), item.get("error")) if public else (None, None)
            lines.append(DrainedLine(int(item["id"]), public, step, error))
        since = drain.get("since")
        rows.append(
            RunnerRow(
                runner,
                online[runner.id],
                [None if j.private else j for j in mine],
                [waited(j.started_at or j.created_at, now) for j in mine],
                lines,
                datetime.fromtimestamp(since, UTC) if isinstance(since, int | float) else None,
            )
        )
    return rows


@dataclass(frozen=True)
class PermissionNotice:
    """One line of the dashboard's banner: a permission the App lacks (`label`), where, what
    waits for it (or that the start-up check found it), and what it stops."""

    label: str
    where: str
    waiting: str
    without: str


def _permission(key: str) -> tuple[str, str]:
    """(`Contents: read`, what lacking it stops) for a waited-for `contents:read`."""
    name, _, level = key.partition(":")
    known = find(name, level)
    return (known.label, known.without) if known else (f"{name}: {level}", "")


def _where(repo: str, private: bool) -> str:
    """A repository as the dashboard may name it: a private one only by its owner."""
    owner = repo.split("/")[0] or "?"
    return f"a private repository of {owner}" if private else repo


def permission_notices(
    deliveries: Sequence[Delivery],
    items: Sequence[OutboxItem],
    problems: Sequence[PermissionProblem],
    private: set[str],
    now: datetime,
) -> list[PermissionNotice]:
    """The banner: per (permission, repository) what waits for it, oldest first, and per
    (permission, installation) what the start-up check or an `installation` event found."""
    found: dict[tuple[str, str], list[datetime]] = {}
    counts: dict[tuple[str, str], list[int]] = {}
    for delivery in deliveries:
        repository = (delivery.payload or {}).get("repository") or {}
        repo = str(repository.get("full_name") or "") if isinstance(repository, dict) else ""
        private_repo = bool(repository.get("private")) if isinstance(repository, dict) else True
        key = (delivery.waiting_for or "", _where(repo, private_repo))
        found.setdefault(key, []).append(delivery.received_at)
        counts.setdefault(key, [0, 0])[0] += 1
    for item in items:
        repo = str(item.payload.get("repo") or "")
        key = (item.waiting_for or "", _where(repo, repo in private))
        found.setdefault(key, []).append(item.created_at)
        counts.setdefault(key, [0, 0])[1] += 1
    out = []
    for (waiting_for, where), since in found.items():
        label, without = _permission(waiting_for)
        n_in, n_out = counts[(waiting_for, where)]
        what = [
            f"{plural(n_in, 'delivery', 'deliveries')} from GitHub" if n_in else "",
            f"{plural(n_out, 'update')} to GitHub" if n_out else "",
        ]
        waits = " and ".join(w for w in what if w)
        text = f"{waits} {'waits' if n_in + n_out == 1 else 'wait'}, the oldest for "
        out.append(PermissionNotice(label, where, text + waited(min(since), now), without))
    for problem in problems:
        where = f"installation {problem.installation_id} on {problem.account or '?'}"
        checked = f"the installation has {problem.granted}"
        out.append(
            PermissionNotice(problem.permission.label, where, checked, problem.permission.without)
        )
    return sorted(out, key=lambda n: (n.label, n.where))


@dataclass(frozen=True)
class FlakyView:
    """One known flaky test as the dashboard lists it."""

    repo: str
    backend: str
    op: str
    test_id: str
    rate: str  # of its re-runs, the share that failed
    flaky_jobs: int
    last_seen: str
    job_ids: tuple[int, ...]  # the latest few, newest first


def flaky_rows(rows: Sequence[FlakyRow], private: set[str], now: datetime) -> list[FlakyView]:
    """The dashboard's flaky tests, per repository and backend, less a private repository's."""
    shown = []
    for row in rows:
        if row.repo in private:
            continue
        rate = row.flake_rate
        failed = "–" if rate is None else f"{rate * 100:.0f} % of {plural(row.reruns, 're-run')}"
        shown.append(
            FlakyView(
                repo=row.repo,
                backend=row.backend,
                op=row.op,
                test_id=row.test_id,
                rate=failed,
                flaky_jobs=row.flaky_jobs,
                last_seen=f"{waited(row.last_seen_at, now)} ago",
                job_ids=tuple(reversed(row.job_ids[-5:])),
            )
        )
    return shown
