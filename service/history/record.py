"""The default branch's history, kept as its jobs end: the queue's listener (`History`) turns
each row of a default-branch job's comparison into a point of its series (repository, operator,
backend, dtype, shape, metric) in the transaction that stored the result, judges what it says
(`series.py`: slower on its own, a drift over the window, a slowdown recovered) and writes
what to tell as outbox rows in that same transaction: the comment on the merged pull request
(once per merge commit, operator and backend) and the one regression issue per (repository,
operator, backend), created, updated or closed. A result recorded again (the same job, or a
Re-run's of the same link) adds nothing, so a restart or a second replica says nothing twice."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from report.verdicts import Judged, Verdict, judged_rows
from service.db.engine import Database, utcnow
from service.db.models import MAIN_TRIGGERS, HistoryPoint, Job, MainRun, RegressionIssue
from service.history.alerts_text import (
    DRIFT,
    SLOWER,
    RowFound,
    alert_tag,
    render_merge_comment,
)
from service.history.issues_outbox import enqueue_issue
from service.history.series import DRIFT as DRIFT_MARK
from service.history.series import Point, chain, find_drift, mark_of, recovered
from service.links import Links
from service.publish.notices import enqueue_reply
from workflows.models import BenchmarkResult, BenchmarkRow, Change, JobResult, JobStatus

SERIES_POINTS = 500  # the newest links of a series read to judge a new one


@dataclass(frozen=True)
class Measured:
    """A row's metric a job measured: its key in the series, its new point, the series'
    newest links (the new one among them) and, where it ended a drift, the drift's window."""

    dtype: str
    shape: str
    metric: str
    point: Point
    series: tuple[Point, ...]
    window: tuple[Point, ...] = ()


def shape_text(row: BenchmarkRow) -> str:
    """`4096×4096`, or `2×3×16×16×16 → 8×8×8` with an output size: the series' size key."""
    text = "×".join(str(n) for n in row.size)
    if row.output_size:
        text += " → " + "×".join(str(n) for n in row.output_size)
    return text[:200]


def _metrics(judged: Judged) -> list[tuple[str, Change, Verdict]]:
    """A row's series: its device time, and a host-bound row's host time over processes."""
    found = [("device", judged.change, judged.device_verdict)]
    if judged.host_verdict is not None and judged.host_change is not None:
        found.append(("host", judged.host_change, judged.host_verdict))
    return found


def _benchmark(job: Job) -> BenchmarkResult | None:
    """A finished default-branch job's compared benchmark, or None (no result, no rows
    compared, timings that are not performance)."""
    try:
        result = JobResult.model_validate(job.result)
    except ValidationError:
        return None
    bench = result.benchmark
    if bench is None or not bench.performance or not bench.rows:
        return None
    return bench


def _as_point(row: HistoryPoint) -> Point:
    change = Change(rounds=max(1, row.rounds), ratio=row.ratio, low=row.low, high=row.high)
    return Point(row.id, row.sha, row.base_sha, change, Verdict(row.verdict), row.mark)


class History:
    """The queue's listener for the default branch's jobs (`JobListener`)."""

    def __init__(self, db: Database, links: Links) -> None:
        self.db = db
        self.links = links

    def job_changed(self, session: Session, job: Job) -> None:
        if job.trigger not in MAIN_TRIGGERS or job.main_run_id is None or job.result is None:
            return
        if not JobStatus(job.status).final or job.base_sha is None:
            return
        taken = select(HistoryPoint.id).where(HistoryPoint.job_id == job.id)
        if session.scalars(taken).first() is not None:
            return  # recorded when it ended; a later change (an acceptance) adds nothing
        run = session.get(MainRun, job.main_run_id)
        bench = _benchmark(job)
        if run is None or bench is None:
            return
        measured = self._record(session, job, bench, run.drift_window)
        found = [_found(m, job.base_sha) for m in measured if m.point.mark in (SLOWER, DRIFT_MARK)]
        if "issue" in run.alerts:
            self._issue(session, job, found, measured)
        if "comment" in run.alerts and run.pull_number is not None and found:
            body = render_merge_comment(
                job.op, job.backend, job.sha, found, job.threshold,
                self.links.job(job.id, job.private),
            )  # fmt: skip
            enqueue_reply(session, job.repo, run.pull_number,
                          alert_tag(job.sha, job.op, job.backend), body)  # fmt: skip

    def queue_moved(self, session: Session, jobs: Sequence[Job]) -> None:
        """Queue positions say nothing of history."""

    def job_progressed(self, session: Session, job: Job) -> None:
        """Progress says nothing of history."""

    # -- points -------------------------------------------------------------------------

    def _record(
        self, session: Session, job: Job, bench: BenchmarkResult, window_size: int
    ) -> list[Measured]:
        """Each compared row's metrics as new points of their series, marked where they are
        flagged on their own or end a drift; a link already recorded is left as it is."""
        measured: list[Measured] = []
        for judged in judged_rows(bench, job.threshold):
            shape = shape_text(judged.row)
            for metric, change, verdict in _metrics(judged):
                row = self._new_point(session, job, judged.row, shape, metric, change, verdict)
                if row is None:
                    continue
                series = tuple(self._series(session, job, judged.row.dtype, shape, metric))
                point = _as_point(row)
                drift = None
                if row.mark is None:
                    drift = find_drift(series, point, window_size, job.threshold)
                if drift is not None:
                    row.mark = DRIFT_MARK
                    point = _as_point(row)
                window = drift.links if drift is not None else ()
                measured.append(Measured(judged.row.dtype, shape, metric, point, series, window))
        session.flush()
        return measured

    def _new_point(
        self,
        session: Session,
        job: Job,
        row: BenchmarkRow,
        shape: str,
        metric: str,
        change: Change,
        verdict: Verdict,
    ) -> HistoryPoint | None:
        assert job.base_sha is not None
        key = {
            "repo": job.repo, "op": job.op, "backend": job.backend, "dtype": row.dtype,
            "shape": shape, "metric": metric, "sha": job.sha, "base_sha": job.base_sha,
        }  # fmt: skip
        query = select(HistoryPoint.id).filter_by(**key)
        if session.scalars(query).first() is not None:
            return None
        point = HistoryPoint(
            **key,
            job_id=job.id,
            rounds=change.rounds,
            ratio=change.ratio,
            low=change.low,
            high=change.high,
            value=row.kernel_ms if metric == "device" else row.kernel_host_us,
            threshold=job.threshold,
            verdict=verdict.value,
            mark=mark_of(verdict),
            created_at=utcnow(),
        )
        session.add(point)
        session.flush()
        return point

    def _series(
        self, session: Session, job: Job, dtype: str, shape: str, metric: str
    ) -> list[Point]:
        """The newest links of a row's series, oldest first (the new one among them)."""
        key = {"repo": job.repo, "op": job.op, "backend": job.backend, "dtype": dtype,
               "shape": shape, "metric": metric}  # fmt: skip
        query = (
            select(HistoryPoint)
            .filter_by(**key)
            .order_by(HistoryPoint.id.desc())
            .limit(SERIES_POINTS)
        )
        return [_as_point(row) for row in reversed(session.scalars(query).all())]

    # -- the issue ----------------------------------------------------------------------

    def _issue(
        self, session: Session, job: Job, found: list[RowFound], measured: list[Measured]
    ) -> None:
        """The one open issue of (repository, operator, backend): rows recovered marked so,
        new findings added (a new issue when none is open), closed with a comment when every
        row has recovered."""
        query = select(RegressionIssue).filter_by(
            repo=job.repo, op=job.op, backend=job.backend, state="open"
        )
        issue = session.scalars(self.db.for_update(query)).first()
        changed = False
        if issue is not None:
            changed = _recover(issue, job, measured)
        if found:
            if issue is None:
                issue = RegressionIssue(
                    repo=job.repo, op=job.op, backend=job.backend, state="open", rows=[],
                    opened_job_id=job.id, created_at=utcnow(),
                )  # fmt: skip
                session.add(issue)
            issue.rows = [*issue.rows, *(self._row(job, f, measured) for f in found)]
            changed = True
        if issue is None or not changed:
            return
        session.flush()
        if all(row.get("recovered_at") for row in issue.rows):
            issue.state, issue.closed_job_id, issue.closed_at = "closed", job.id, utcnow()
        enqueue_issue(self.db, session, issue)

    def _row(self, job: Job, found: RowFound, measured: list[Measured]) -> dict[str, Any]:
        """An issue row for a finding: what, where it starts (the link its chain begins at) and
        the job that found it."""
        (m,) = [m for m in measured if (m.dtype, m.shape, m.metric) == _key(found)]
        start = m.window[0].id if found.kind == DRIFT else m.point.id
        change = found.change
        return {
            "dtype": found.dtype, "shape": found.shape, "metric": found.metric,
            "kind": found.kind, "ratio": change.ratio, "low": change.low, "high": change.high,
            "rounds": change.rounds, "since": found.since, "links": found.links,
            "start_id": start, "found_at": job.sha, "job_id": job.id,
            "job_url": self.links.job(job.id, job.private), "threshold": job.threshold,
            "recovered_at": None, "recovered": None,
        }  # fmt: skip


def _key(found: RowFound) -> tuple[str, str, str]:
    return found.dtype, found.shape, found.metric


def _found(m: Measured, base_sha: str) -> RowFound:
    """What a flagged point says: slower on its own (against the job's base), or a drift over
    its window."""
    if m.point.mark == DRIFT_MARK:
        change = chain([p.change for p in m.window])
        return RowFound(m.dtype, m.shape, m.metric, DRIFT, change, m.window[0].base_sha,
                        len(m.window))  # fmt: skip
    return RowFound(m.dtype, m.shape, m.metric, SLOWER, m.point.change, base_sha)


def _recover(issue: RegressionIssue, job: Job, measured: list[Measured]) -> bool:
    """Mark the issue's rows this job finds recovered; whether any was."""
    by_key = {(m.dtype, m.shape, m.metric): m for m in measured}
    rows = []
    changed = False
    for row in issue.rows:
        m = by_key.get((row["dtype"], row["shape"], row["metric"]))
        if row.get("recovered_at") is None and m is not None and m.point.id != row["start_id"]:
            back = recovered(m.series, m.point, int(row["start_id"]), job.threshold)
            if back is not None:
                recovered_change = {"ratio": back.ratio, "low": back.low, "high": back.high,
                                    "rounds": back.rounds}  # fmt: skip
                row = {**row, "recovered_at": job.sha, "recovered": recovered_change}
                changed = True
        rows.append(row)
    issue.rows = rows
    return changed
