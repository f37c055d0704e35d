"""The dashboard (`GET /`): a banner naming each permission the GitHub App lacks (and what
waits for it), the queue of each backend, the runners and what they run, the known flaky
tests, the speedup charts per (operator, backend), the default branch's trend pages of each
public repository, and the job history, filterable. A private repository's jobs are counted,
never shown."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from report.markdown import utc
from service.db.engine import Database, utcnow
from service.db.models import Job
from service.github.installations import PermissionProblem
from service.links import trends_path
from service.queue import queries
from service.queue.flaky import FlakyTests
from service.queue.runners import RunnerRegistry
from service.web import dashboard_views, speedup_chart, trend_reads
from service.web.job_page_views import job_duration, waited
from service.web.templating import templates
from workflows.models import JobStatus
from workflows.spec import WorkflowSpec

HISTORY_ROWS = 100
CHART_JOBS = 500
DASHBOARD_REFRESH_S = 5


def dashboard_router(
    *,
    db: Database,
    runners: RunnerRegistry,
    workflows: Mapping[str, WorkflowSpec],
    permission_problems: Callable[[], Sequence[PermissionProblem]],
    flaky_tests: FlakyTests,
) -> APIRouter:
    """The dashboard over the queue's repositories; `permission_problems`: what the App's
    installations lack, as last checked."""
    router = APIRouter()

    @router.get("/", response_class=HTMLResponse)
    def dashboard(
        repo: str | None = None,
        op: str | None = None,
        backend: str | None = None,
        state: str | None = None,
    ) -> HTMLResponse:
        wanted = queries.HistoryFilter(repo=repo, op=op, backend=backend, state=state)
        shown = _dashboard(db, runners, workflows, permission_problems, flaky_tests, wanted)
        page = templates.get_template("dashboard.html").render(
            **shown,
            filters={"repo": repo, "op": op, "backend": backend, "state": state},
            filtered=any((repo, op, backend, state)),
        )
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})

    return router


def _dashboard(
    db: Database,
    runners: RunnerRegistry,
    workflows: Mapping[str, WorkflowSpec],
    permission_problems: Callable[[], Sequence[PermissionProblem]],
    flaky_tests: FlakyTests,
    wanted: queries.HistoryFilter,
) -> dict[str, Any]:
    """What the dashboard's template lays out, read now (each read in a short session)."""
    now = utcnow()
    with db.reads() as session:
        queued = queries.queued_jobs(session)
        running = queries.running_jobs(session)
        history = queries.public_history(session, wanted, HISTORY_ROWS)
        choices = queries.public_choices(session)
        charted = queries.public_benchmarked(session, CHART_JOBS)
        waiting, held = queries.parked(session)
        private = queries.private_repos(session, {str(i.payload.get("repo")) for i in held})
        trended = trend_reads.public_operators(session)
    flaky_found = flaky_tests.listed()
    with db.reads() as session:
        hidden = queries.private_repos(session, {r.repo for r in flaky_found})
    registered = runners.all()
    with db.reads() as session:
        named = queries.jobs_by_id(session, dashboard_views.drained_ids(registered))
    backends = sorted(set(workflows) | {j.backend for j in queued})
    online = {b: runners.online_count(b, registered) for b in backends}
    choices["state"] = [s.value for s in JobStatus]
    active = bool(queued or running)
    notices = dashboard_views.permission_notices(waiting, held, permission_problems(), private, now)
    rows = dashboard_views.runner_rows(
        registered, running, {r.id: runners.online(r, now) for r in registered}, now, named
    )
    return {
        "now": utc(now),
        "permissions": notices,
        "queues": dashboard_views.queues(queued, backends, online, now),
        "runners": [_runner_row(row, now) for row in rows],
        "charts": [_chart(c) for c in speedup_chart.charts(charted)],
        "trends": [_trends(repo, ops) for repo, ops in trended.items()],
        "flaky": dashboard_views.flaky_rows(flaky_found, hidden, now),
        "history": [_history_row(j, now) for j in history],
        "choices": choices,
        "refresh": DASHBOARD_REFRESH_S if active else None,
    }


def _runner_row(row: dashboard_views.RunnerRow, now: datetime) -> dict[str, Any]:
    return {
        "runner": row.runner,
        "online": row.online,
        "jobs": row.jobs,
        "elapsed": row.elapsed,
        "last_seen": f"{waited(row.runner.last_seen_at, now)} ago",
        "drained": row.drained,
        "drained_since": utc(row.drained_since) if row.drained_since else None,
    }


def _chart(chart: speedup_chart.Chart) -> dict[str, Any]:
    return {"op": chart.op, "backend": chart.backend, "points": chart.points,
            "svg": Markup(chart.svg)}  # fmt: skip


def _trends(repo: str, ops: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """A repository's default-branch trend pages: its index and each operator's."""
    pages = [{"op": op, "backend": b, "url": trends_path(repo, op, b)} for op, b in ops]
    return {"repo": repo, "url": trends_path(repo), "operators": pages}


def _history_row(job: Job, now: datetime) -> dict[str, Any]:
    return {
        "job": job,
        "queued": utc(job.created_at),
        "ran": job_duration(job, now),
        "speedup": speedup_chart.job_speedup(job),
    }
