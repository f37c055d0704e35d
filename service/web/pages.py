"""The pages people read, server-rendered with Jinja2 (`service/web/templates/`):

- `GET /`: the dashboard: a banner naming each permission the GitHub App lacks (and what
  waits for it), the queue of each backend, the runners and what they run, the speedup
  charts per (operator, backend), and the job history, filterable;
- `GET /jobs/{id}`: the job page (its commit status's *Details*): state, step timeline,
  progress, the report rendered from its Markdown, the log's tail, updated live while the job
  runs (`/static/live.js` reads `GET /jobs/{id}/live`);
- `GET /jobs/{id}/log`: the log as text, streamed from the store (`Range` or `?tail=N`);
  410 with a sentence once retention pruned it;
- `GET /healthz` (liveness: the process answers; it reads no database, so a database outage,
  which every replica shares, neither restarts replicas nor takes them all out of a load
  balancer: each answers 503 with `Retry-After` itself and serves again the moment the
  database is back), `GET /readyz` (readiness: the database answers, 503 while it does not),
  and the pages' two static files.

A job of a private repository opens only with the key its links carry (else the same 404 as
for a job that does not exist, or was pruned: a sentence says which it may be) and is never
listed."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from importlib.resources import files
from typing import Any

from fastapi import APIRouter, Header, HTTPException, Query
from fastapi.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup
from sqlalchemy import text

from service.db.engine import Database, utcnow
from service.db.models import Job
from service.github.installations import PermissionProblem
from service.links import Links
from service.queue import queries
from service.queue.flaky import FlakyTests
from service.queue.jobs import JobQueue
from service.queue.logs import JobLogs
from service.queue.retention import Retention
from service.queue.runners import RunnerRegistry
from service.render.comment import render_comment, summary
from service.render.markdown import utc
from service.render.views import JobView
from service.report.job_views import JobViews
from service.web import page_views
from service.web.ranges import Unsatisfiable, byte_range
from service.web.report_html import report_html
from workflows.models import JobStatus
from workflows.spec import WorkflowSpec

LOG_TAIL_BYTES = 16 * 1024
HISTORY_ROWS = 100
CHART_JOBS = 500
DASHBOARD_REFRESH_S = 5
STATIC = {"live.js": "text/javascript", "ondemand.css": "text/css"}

templates = Environment(
    loader=PackageLoader("service.web", "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)


def _iso(moment: datetime | None) -> str | None:
    """ISO 8601 (the database's datetimes are aware, in UTC)."""
    return moment.isoformat() if moment is not None else None


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
    router = APIRouter()
    workflows = workflows or {}
    kept_days = (retention or Retention()).job_days
    flaky_tests = flaky or FlakyTests(db)

    def visible(job: Job | None, job_id: int, key: str | None) -> Job:
        if job is None or not links.opens(job_id, job.private, key):
            raise HTTPException(404, page_views.missing_job_text(job_id, kept_days))
        return job

    def planned(backend: str) -> list[str]:
        spec = workflows.get(backend)
        return [step.name for step in spec.steps] if spec else []

    def live_state(job: Job, view: JobView) -> dict[str, Any]:
        """What the job page shows and `live.js` refreshes (read after the job's session)."""
        size = 0 if job.log_pruned_at is not None else job.log_size
        start = max(size - LOG_TAIL_BYTES, 0)
        tail = logs.read(job.id, start, size - start) if size else b""
        text = page_views.log_text(tail, cut=start > 0)
        if job.log_pruned_at is not None:
            text = page_views.pruned_log_text(job.finished_at, job.log_pruned_at)
        progress = view.progress
        steps = page_views.timeline(
            planned(job.backend),
            job.status,
            view.result,
            tail,
            current=progress.step if progress is not None else None,
        )
        now = utcnow()
        return {
            "status": job.status,
            "active": job.status in (JobStatus.queued, JobStatus.running),
            "summary": summary(view),
            "runner": job.runner_name,
            "elapsed": page_views.job_duration(job, now, view.estimate_s),
            "progress": page_views.progress_text(view),
            "timeline": [{"name": s.name, "state": s.state, "duration": s.duration} for s in steps],
            "log": text,
            "log_size": size,
            "log_cut": start > 0,
            "log_pruned": job.log_pruned_at is not None,
        }

    def job_state(job_id: int, key: str | None) -> tuple[JobView, list[JobView], dict[str, Any]]:
        with db.reads() as session:
            job = visible(session.get(Job, job_id), job_id, key)
            target = views.target(session, job)
        current = next(v for v in target if v.id == job_id)
        return current, target, live_state(job, current)

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

    @router.get("/jobs/{job_id}", response_class=HTMLResponse)
    def job_page(job_id: int, key: str | None = None) -> HTMLResponse:
        try:
            current, target, live = job_state(job_id, key)
        except HTTPException as missing:
            page = templates.get_template("missing.html").render(
                job_id=job_id, sentence=missing.detail
            )
            return HTMLResponse(page, status_code=404, headers={"Cache-Control": "no-store"})
        history = [v for v in target if v.id < job_id]
        repo_url = f"{github_html_url}/{current.repo}"
        key_query = f"?key={key}" if key and links.opens(job_id, True, key) else ""
        page = templates.get_template("job.html").render(
            job=current,
            summary=live["summary"],
            created=utc(current.created_at),
            elapsed=live["elapsed"],
            timeline=live["timeline"],
            progress=live["progress"],
            active=live["active"],
            report=Markup(report_html(render_comment(current, history))),
            log=live["log"],
            log_size=live["log_size"],
            log_cut=live["log_cut"],
            log_pruned=live["log_pruned"],
            live_url=f"/jobs/{job_id}/live{key_query}",
            result_url=f"/jobs/{job_id}/result.json{key_query}",
            pr_url=f"{repo_url}/pull/{current.pr_number}",
            commit_url=f"{repo_url}/commit/{current.sha}",
            refresh=None,
        )
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})

    @router.get("/jobs/{job_id}/live")
    def job_live(job_id: int, key: str | None = None) -> Response:
        _, _, live = job_state(job_id, key)
        return JSONResponse(live, headers={"Cache-Control": "no-store"})

    @router.get("/jobs/{job_id}/result.json")
    def job_result(job_id: int, key: str | None = None) -> JSONResponse:
        """The job and its result as the runner reported it (accuracy, every benchmark row
        with both sides' rounds, medians and the change's interval, the environment), for
        scripts and for anyone checking a verdict; `result` is null until the job ends."""
        with db.reads() as session:
            job = visible(session.get(Job, job_id), job_id, key)
            body = {
                "id": job.id,
                "repo": job.repo,
                "pr_number": job.pr_number,
                "sha": job.sha,
                "base_sha": job.base_sha,
                "op": job.op,
                "backend": job.backend,
                "status": job.status,
                "attempt": job.attempt,
                "reason": job.reason,
                "threshold": job.threshold,
                "gate": job.gate,
                "accepted_by": job.accepted_by,
                "created_at": _iso(job.created_at),
                "started_at": _iso(job.started_at),
                "finished_at": _iso(job.finished_at),
                "result": job.result,
            }
        return JSONResponse(body, headers={"Cache-Control": "no-store"})

    @router.get("/jobs/{job_id}/log", response_class=PlainTextResponse)
    def job_log(
        job_id: int,
        key: str | None = None,
        tail: int | None = Query(default=None, ge=1, description="only the last N bytes"),
        range_: str | None = Header(default=None, alias="range"),
    ) -> Response:
        job = visible(jobs.get_job(job_id), job_id, key)
        media = "text/plain; charset=utf-8"
        if job.log_pruned_at is not None:
            gone = page_views.pruned_log_text(job.finished_at, job.log_pruned_at)
            return PlainTextResponse(gone + "\n", status_code=410, media_type=media)
        size = logs.size(job_id)
        headers = {"Accept-Ranges": "bytes", "Cache-Control": "no-store"}
        try:
            wanted = byte_range(range_ if tail is None else f"bytes=-{tail}", size)
        except Unsatisfiable as exc:
            return Response(status_code=416, headers={**headers, "Content-Range": str(exc)})
        if wanted is None:
            body = logs.stream(job_id, 0, size)
            headers["Content-Length"] = str(size)
            return StreamingResponse(body, media_type=media, headers=headers)
        headers["Content-Length"] = str(wanted.end - wanted.start)
        body = logs.stream(job_id, wanted.start, wanted.end)
        if tail is None:
            headers["Content-Range"] = wanted.content_range(size)
        code = 200 if tail is not None else 206
        return StreamingResponse(body, status_code=code, media_type=media, headers=headers)

    @router.get("/", response_class=HTMLResponse)
    def dashboard(
        repo: str | None = None,
        op: str | None = None,
        backend: str | None = None,
        state: str | None = None,
    ) -> HTMLResponse:
        wanted = queries.HistoryFilter(repo=repo, op=op, backend=backend, state=state)
        now = utcnow()
        with db.reads() as session:
            queued = queries.queued_jobs(session)
            running = queries.running_jobs(session)
            history = queries.public_history(session, wanted, HISTORY_ROWS)
            choices = queries.public_choices(session)
            charted = queries.public_benchmarked(session, CHART_JOBS)
            waiting, held = queries.parked(session)
            private = queries.private_repos(session, {str(i.payload.get("repo")) for i in held})
        flaky_found = flaky_tests.listed()
        with db.reads() as session:
            hidden = queries.private_repos(session, {r.repo for r in flaky_found})
        registered = runners.all()
        with db.reads() as session:
            named = queries.jobs_by_id(session, page_views.drained_ids(registered))
        backends = sorted(set(workflows) | {j.backend for j in queued})
        online = {b: runners.online_count(b, registered) for b in backends}
        choices["state"] = [s.value for s in JobStatus]
        active = bool(queued or running)
        notices = page_views.permission_notices(
            waiting, held, permission_problems(), private, now
        )
        page = templates.get_template("dashboard.html").render(
            now=utc(now),
            permissions=notices,
            queues=page_views.queues(queued, backends, online, now),
            runners=[
                _runner_row(row, now)
                for row in page_views.runner_rows(
                    registered,
                    running,
                    {r.id: runners.online(r, now) for r in registered},
                    now,
                    named,
                )
            ],
            charts=[_chart(c) for c in page_views.charts(charted)],
            flaky=page_views.flaky_rows(flaky_found, hidden, now),
            history=[_history_row(j, now) for j in history],
            choices=choices,
            filters={"repo": repo, "op": op, "backend": backend, "state": state},
            filtered=any((repo, op, backend, state)),
            refresh=DASHBOARD_REFRESH_S if active else None,
        )
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})

    return router


def _runner_row(row: page_views.RunnerRow, now: datetime) -> dict[str, Any]:
    return {
        "runner": row.runner,
        "online": row.online,
        "jobs": row.jobs,
        "elapsed": row.elapsed,
        "last_seen": f"{page_views.waited(row.runner.last_seen_at, now)} ago",
        "drained": row.drained,
        "drained_since": utc(row.drained_since) if row.drained_since else None,
    }


def _chart(chart: page_views.Chart) -> dict[str, Any]:
    return {"op": chart.op, "backend": chart.backend, "points": chart.points,
            "svg": Markup(chart.svg)}  # fmt: skip


def _history_row(job: Job, now: datetime) -> dict[str, Any]:
    return {
        "job": job,
        "queued": utc(job.created_at),
        "ran": page_views.job_duration(job, now),
        "speedup": page_views.job_speedup(job),
    }
