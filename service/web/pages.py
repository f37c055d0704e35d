"""The pages people read, server-rendered with Jinja2 (`service/web/templates/`):

- `GET /`: the dashboard: a banner naming each permission the GitHub App lacks (and what
  waits for it), the queue of each backend, the runners and what they run, the speedup
  charts per (operator, backend), and the job history, filterable;
- `GET /jobs/{id}`: the job page (its commit status's *Details*): state, step timeline,
  progress, the report rendered from its Markdown, the log's tail, updated live while the job
  runs (`/static/live.js` reads `GET /jobs/{id}/live`);
- `GET /trends/{owner}/{name}` and `/trends/{owner}/{name}/{op}/{backend}`: the default
  branch's history, each row of an operator over its commits (`trends.py`);
- `GET /jobs/{id}/log`: the log as text, streamed from the store (`Range` or `?tail=N`);
  410 with a sentence once retention pruned it;
- `GET /healthz` (liveness: the process answers; it reads no database, so a database outage,
  which every replica shares, neither restarts replicas nor takes them all out of a load
  balancer: each answers 503 with `Retry-After` itself and serves again the moment the
  database is back), `GET /readyz` (readiness: the database answers, 503 while it does not),
  and the pages' two static files.

A job of a private repository opens only with the key its links carry (else the same 404 as
for a job that does not exist, or was pruned: a sentence says which it may be) and is never
listed. This module composes them: the dashboard is `dashboard.py`, a job's pages are
`job_pages.py`, the trend pages `trends.py`, and liveness, readiness and the static files
are here."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from importlib.resources import files

from fastapi import APIRouter, HTTPException
from fastapi.responses import Response
from sqlalchemy import text

from service.db.engine import Database
from service.github.installations import PermissionProblem
from service.links import Links
from service.publish.job_views import JobViews
from service.queue.flaky import FlakyTests
from service.queue.jobs import JobQueue
from service.queue.logs import JobLogs
from service.queue.retention import Retention
from service.queue.runners import RunnerRegistry
from service.web.dashboard import dashboard_router
from service.web.job_pages import JobReader, job_data_router, job_page_router
from service.web.trends import trends_router
from workflows.spec import WorkflowSpec

STATIC = {"live.js": "text/javascript", "ondemand.css": "text/css"}


def pages_router(
    *,
    db: Database,
    jobs: JobQueue,
    runners: RunnerRegistry,
    logs: JobLogs,
    views: JobViews,
    links: Links,
    workflows: Mapping[str, WorkflowSpec] | None = None,
    github_html_url: str = "https://github.com",
    permission_problems: Callable[[], Sequence[PermissionProblem]] = tuple,
    retention: Retention | None = None,
    flaky: FlakyTests | None = None,
) -> APIRouter:
    """The pages over the queue's repositories; `permission_problems`: what the App's
    installations lack, as last checked."""
    workflows = workflows or {}
    kept_days = (retention or Retention()).job_days
    reader = JobReader(db, jobs, logs, views, links, workflows, kept_days)
    router = APIRouter()
    router.include_router(health_router(db))
    router.include_router(job_page_router(reader, github_html_url))
    router.include_router(job_data_router(reader))
    router.include_router(trends_router(db, links, github_html_url))
    router.include_router(
        dashboard_router(
            db=db,
            runners=runners,
            workflows=workflows,
            permission_problems=permission_problems,
            flaky_tests=flaky or FlakyTests(db),
        )
    )
    return router


def health_router(db: Database) -> APIRouter:
    """Liveness, readiness and the pages' static files."""
    router = APIRouter()

    @router.get("/healthz")
    def healthz() -> dict[str, str]:
        state = "unreachable" if db.outages.down else "ok"
        return {"status": "ok", "database": db.engine.dialect.name, "database_state": state}

    @router.get("/readyz")
    def readyz() -> dict[str, str]:
        with db.engine.connect() as conn:  # unreachable: 503 by the outage handler
            conn.execute(text("SELECT 1"))
        return {"status": "ready", "database": db.engine.dialect.name}

    @router.get("/static/{name}")
    def static(name: str) -> Response:
        if name not in STATIC:
            raise HTTPException(404, "no such file")
        body = files("service.web").joinpath("static", name).read_bytes()
        return Response(body, media_type=STATIC[name], headers={"Cache-Control": "max-age=300"})

    return router
