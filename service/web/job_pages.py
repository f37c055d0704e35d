"""A job's pages: its page (the commit status's *Details*) and the live state `live.js`
refreshes it from, its result as JSON, its log as text and its artifacts (a profile's traces,
gzip). A private repository's job opens
only with the key its links carry (`JobReader.visible`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Header, HTTPException, Query
from fastapi.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from markupsafe import Markup

from report.comment import render_comment
from report.markdown import utc
from report.summary import summary
from report.views import JobView
from service.db.engine import Database, utcnow
from service.db.models import Job
from service.links import Links
from service.publish.job_views import JobViews
from service.queue.artifacts import JobArtifacts, valid_name
from service.queue.jobs import JobQueue
from service.queue.logs import JobLogs
from service.web import job_page_views, trend_reads
from service.web.ranges import Unsatisfiable, byte_range
from service.web.report_html import report_html
from service.web.templating import templates
from workflows.models import JobStatus
from workflows.spec import WorkflowSpec

LOG_TAIL_BYTES = 16 * 1024


def _iso(moment: datetime | None) -> str | None:
    """ISO 8601 (the database's datetimes are aware, in UTC)."""
    return moment.isoformat() if moment is not None else None


@dataclass(frozen=True)
class JobReader:
    """What a job's pages read through: the job if the key opens it, its views and its live
    state."""

    db: Database
    jobs: JobQueue
    logs: JobLogs
    views: JobViews
    links: Links
    workflows: Mapping[str, WorkflowSpec]
    kept_days: float  # how long finished jobs are kept (what a missing job's sentence says)

    def visible(self, job: Job | None, job_id: int, key: str | None) -> Job:
        """`job` where `key` opens it, else the 404 of a job that is not there."""
        if job is None or not self.links.opens(job_id, job.private, key):
            raise HTTPException(404, job_page_views.missing_job_text(job_id, self.kept_days))
        return job

    def planned(self, backend: str) -> list[str]:
        spec = self.workflows.get(backend)
        return [step.name for step in spec.steps] if spec else []

    def live_state(self, job: Job, view: JobView) -> dict[str, Any]:
        """What the job page shows and `live.js` refreshes (read after the job's session)."""
        size = 0 if job.log_pruned_at is not None else job.log_size
        start = max(size - LOG_TAIL_BYTES, 0)
        tail = self.logs.read(job.id, start, size - start) if size else b""
        text = job_page_views.log_text(tail, cut=start > 0)
        if job.log_pruned_at is not None:
            text = job_page_views.pruned_log_text(job.finished_at, job.log_pruned_at)
        progress = view.progress
        steps = job_page_views.timeline(
            self.planned(job.backend),
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
            "elapsed": job_page_views.job_duration(job, now, view.estimate_s),
            "progress": job_page_views.progress_text(view),
            "timeline": [{"name": s.name, "state": s.state, "duration": s.duration} for s in steps],
            "log": text,
            "log_size": size,
            "log_cut": start > 0,
            "log_pruned": job.log_pruned_at is not None,
        }

    def trend_url(self, view: JobView) -> str | None:
        """The default branch's trend page of the job's operator and backend, where it has
        history; a private repository's with its key (the job's page opened with the job's)."""
        with self.db.reads() as session:
            if not trend_reads.has_history(session, view.repo, view.op, view.backend):
                return None
            hidden = trend_reads.private(session, view.repo)
        return self.links.trends_path(view.repo, hidden, view.op, view.backend)

    def job_state(
        self, job_id: int, key: str | None
    ) -> tuple[JobView, list[JobView], dict[str, Any]]:
        """The job's view, its target's (every job of its operator and backend on its pull
        request) and its live state."""
        with self.db.reads() as session:
            job = self.visible(session.get(Job, job_id), job_id, key)
            target = self.views.target(session, job)
        current = next(v for v in target if v.id == job_id)
        return current, target, self.live_state(job, current)


def job_page_router(reader: JobReader, github_html_url: str) -> APIRouter:
    """The job page and its live state."""
    router = APIRouter()
    links = reader.links

    @router.get("/jobs/{job_id}", response_class=HTMLResponse)
    def job_page(job_id: int, key: str | None = None) -> HTMLResponse:
        try:
            current, target, live = reader.job_state(job_id, key)
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
            # A default-branch job has no pull request: its commit stands for it.
            pr_url=(
                f"{repo_url}/pull/{current.pr_number}"
                if current.pr_number
                else f"{repo_url}/commit/{current.sha}"
            ),
            commit_url=f"{repo_url}/commit/{current.sha}",
            trend_url=reader.trend_url(current),
            artifacts=[
                (a.name, a.size, f"/jobs/{job_id}/artifacts/{a.name}{key_query}")
                for a in JobArtifacts(reader.db).list(job_id)
            ],
            refresh=None,
        )
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})

    @router.get("/jobs/{job_id}/live")
    def job_live(job_id: int, key: str | None = None) -> Response:
        _, _, live = reader.job_state(job_id, key)
        return JSONResponse(live, headers={"Cache-Control": "no-store"})

    return router


def job_data_router(reader: JobReader) -> APIRouter:
    """What scripts read of a job: its result as JSON and its log as text."""
    router = APIRouter()
    db, logs = reader.db, reader.logs

    @router.get("/jobs/{job_id}/result.json")
    def job_result(job_id: int, key: str | None = None) -> JSONResponse:
        """The job and its result as the runner reported it (accuracy, every benchmark row
        with both sides' rounds, medians and the change's interval, the environment), for
        scripts and for anyone checking a verdict; `result` is null until the job ends."""
        with db.reads() as session:
            job = reader.visible(session.get(Job, job_id), job_id, key)
            body = {
                "id": job.id,
                "repo": job.repo,
                "pr_number": job.pr_number,  # 0: the default branch's own (`trigger`)
                "trigger": job.trigger,
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
        job = reader.visible(reader.jobs.get_job(job_id), job_id, key)
        media = "text/plain; charset=utf-8"
        if job.log_pruned_at is not None:
            gone = job_page_views.pruned_log_text(job.finished_at, job.log_pruned_at)
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

    @router.get("/jobs/{job_id}/artifacts/{name}")
    def job_artifact(job_id: int, name: str, key: str | None = None) -> Response:
        """A file the job's runner uploaded (a profile's trace), as it was sent: gzip."""
        reader.visible(reader.jobs.get_job(job_id), job_id, key)
        data = JobArtifacts(db).read(job_id, name) if valid_name(name) else None
        if data is None:
            raise HTTPException(404, f"job {job_id} has no artifact of that name")
        disposition = f'attachment; filename="{name}.gz"'
        headers = {"Content-Disposition": disposition, "Cache-Control": "no-store"}
        return Response(data, media_type="application/gzip", headers=headers)

    return router
