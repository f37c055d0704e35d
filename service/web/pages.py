"""Read-only pages: `GET /` (recent jobs and runners), `GET /jobs/{id}` (state and the
rendered report), `GET /jobs/{id}/log` (the log as text, streamed from the store; a `Range`
header or `?tail=N` for part of it), `GET /healthz`."""

from __future__ import annotations

from html import escape

from fastapi import APIRouter, Header, HTTPException, Query
from fastapi.responses import HTMLResponse, PlainTextResponse, Response, StreamingResponse
from sqlalchemy import text

from service.db.engine import Database
from service.db.models import Job
from service.links import Links
from service.queue.jobs import JobQueue
from service.queue.logs import JobLogs
from service.queue.runners import RunnerRegistry
from service.render.comment import render_comment
from service.report.job_views import JobViews
from service.web.ranges import Unsatisfiable, byte_range

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 70rem; padding: 0 1rem; }
table { border-collapse: collapse; } td, th { border: 1px solid #ccc; padding: .25rem .5rem; }
pre { background: #f6f8fa; padding: 1rem; overflow-x: auto; white-space: pre-wrap; }
.queued { color: #9a6700; } .running { color: #0969da; } .succeeded { color: #1a7f37; }
.failed, .errored, .timed_out { color: #cf222e; } .cancelled, .superseded { color: #6e7781; }
"""


def _page(title: str, body: str) -> HTMLResponse:
    return HTMLResponse(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"<style>{_STYLE}</style></head><body>{body}</body></html>"
    )


def pages_router(
    *,
    db: Database,
    jobs: JobQueue,
    runners: RunnerRegistry,
    logs: JobLogs,
    views: JobViews,
    links: Links,
) -> APIRouter:
    """The read-only pages over the queue's repositories. A job of a private repository is
    shown only with the key its links carry; without it the answer is the same 404 as for a
    job that does not exist."""
    router = APIRouter()

    def visible(job: Job | None, job_id: int, key: str | None) -> Job:
        if job is None or not links.opens(job_id, job.private, key):
            raise HTTPException(404, f"no job {job_id}")
        return job

    @router.get("/healthz")
    def healthz() -> dict[str, str]:
        with db.engine.connect() as conn:
            conn.execute(text("SELECT 1"))
        return {"status": "ok", "database": db.engine.dialect.name}

    @router.get("/jobs/{job_id}", response_class=HTMLResponse)
    def job_page(job_id: int, key: str | None = None) -> HTMLResponse:
        with db.reads() as session:
            job = visible(session.get(Job, job_id), job_id, key)
            target = views.target(session, job)
        current = next(v for v in target if v.id == job_id)
        history = [v for v in target if v.id < job_id]
        report = render_comment(current, history)
        facts = [
            ("state", f"<span class='{escape(current.status)}'>{escape(current.status)}</span>"),
            ("repository", escape(current.repo)),
            ("pull request", f"#{current.pr_number}"),
            ("operator", escape(current.op)),
            ("backend", escape(current.backend)),
            ("commit", f"<code>{escape(current.sha)}</code>"),
            ("attempt", str(current.attempt)),
            ("runner", escape(current.runner_name or "—")),
            ("reason", escape(current.reason or "—")),
            ("created", escape(current.created_at.isoformat())),
            ("started", escape(current.started_at.isoformat() if current.started_at else "—")),
            ("finished", escape(current.finished_at.isoformat() if current.finished_at else "—")),
        ]
        rows = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in facts)
        body = (
            f"<h1>Job #{job_id}: {escape(current.op)} on {escape(current.backend)}</h1>"
            f"<table>{rows}</table>"
            f"<p><a href='{escape(current.log_url)}'>full log</a> · <a href='/'>all jobs</a></p>"
            f"<h2>Report</h2><pre>{escape(report)}</pre>"
        )
        return _page(f"job {job_id}", body)

    @router.get("/jobs/{job_id}/log", response_class=PlainTextResponse)
    def job_log(
        job_id: int,
        key: str | None = None,
        tail: int | None = Query(default=None, ge=1, description="only the last N bytes"),
        range_: str | None = Header(default=None, alias="range"),
    ) -> Response:
        visible(jobs.get_job(job_id), job_id, key)
        size = logs.size(job_id)
        headers = {"Accept-Ranges": "bytes", "Cache-Control": "no-store"}
        media = "text/plain; charset=utf-8"
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
    def dashboard() -> HTMLResponse:
        recent = [j for j in jobs.recent_jobs(50) if not j.private]
        registered = runners.all()
        job_rows = "".join(
            f"<tr><td><a href='/jobs/{j.id}'>#{j.id}</a></td>"
            f"<td>{escape(j.repo)}#{j.pr_number}</td>"
            f"<td>{escape(j.op)}</td><td>{escape(j.backend)}</td>"
            f"<td class='{escape(j.status)}'>{escape(j.status)}</td>"
            f"<td><code>{escape(j.sha[:7])}</code></td><td>{escape(j.runner_name or '')}</td></tr>"
            for j in recent
        )
        runner_rows = "".join(
            f"<tr><td>{escape(r.name)}</td><td>{escape(', '.join(r.backends))}</td>"
            f"<td>{'online' if runners.online(r) else 'offline'}</td>"
            f"<td>{'healthy' if r.healthy else escape('sick: ' + (r.health_reason or ''))}</td>"
            f"<td>{escape(r.last_seen_at.isoformat())}</td></tr>"
            for r in registered
        )
        body = (
            "<h1>On-demand kernel tests</h1><h2>Recent jobs</h2>"
            "<table><tr><th>job</th><th>PR</th><th>operator</th><th>backend</th><th>state</th>"
            f"<th>commit</th><th>runner</th></tr>{job_rows}</table>"
            "<h2>Runners</h2><table><tr><th>name</th><th>backends</th><th>seen</th><th>health</th>"
            f"<th>last seen</th></tr>{runner_rows}</table>"
        )
        return _page("ondemand", body)

    return router
