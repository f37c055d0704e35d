"""Jobs as the renderer sees them: a `JobView` from a job row, with its queue position, the
runners online for its backend and its page links; and the backends as `/test help` shows
them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from sqlalchemy.orm import Session

from report.views import JobView, KnownFlaky
from service.db.engine import utcnow
from service.db.models import Job
from service.links import Links
from service.queue import queries
from service.queue.flaky import known_flaky
from service.queue.runners import RunnerRegistry
from service.render.replies import BackendInfo
from workflows.models import JobResult, JobStatus, Progress
from workflows.spec import WorkflowSpec


class JobViews:
    def __init__(
        self, links: Links, runners: RunnerRegistry, workflows: Mapping[str, WorkflowSpec]
    ) -> None:
        self.links = links
        self.runners = runners
        self.workflows = workflows

    def view(self, session: Session, job: Job, runners_online: int | None = None) -> JobView:
        """`job` as of `session`; `runners_online` saves a query when the caller knows it."""
        result: JobResult | None = None
        if job.result is not None:
            try:
                result = JobResult.model_validate(job.result)
            except ValidationError:
                result = None
        online = runners_online
        if online is None:
            online = self.runners.online_count(job.backend, self.runners.all(session))
        return JobView(
            id=job.id,
            repo=job.repo,
            pr_number=job.pr_number,
            op=job.op,
            backend=job.backend,
            sha=job.sha,
            status=JobStatus(job.status),
            bench=job.bench,
            compare=job.compare,
            created_at=job.created_at,
            started_at=job.started_at,
            finished_at=job.finished_at,
            runner_name=job.runner_name,
            queue_position=queries.queue_position(session, job),
            runners_online=online,
            job_url=self.links.job(job.id, job.private),
            log_url=self.links.log(job.id, job.private),
            result=result,
            reason=job.reason,
            attempt=job.attempt,
            threshold=job.threshold,
            gate=job.gate,
            accepted_by=job.accepted_by,
            base_ref=job.base_ref,
            known_flaky=_known_flaky(session, job, result),
            exact_base=job.exact_base,
            base_sha=job.base_sha,
            **_running(session, job),
        )

    def target(self, session: Session, job: Job) -> list[JobView]:
        """Every run of `job`'s (PR, op, backend), oldest first."""
        online = self.runners.online_count(job.backend, self.runners.all(session))
        jobs = queries.target_jobs(session, job.repo, job.pr_number, job.op, job.backend)
        return [self.view(session, j, online) for j in jobs]

    def backends(self) -> list[BackendInfo]:
        runners = self.runners.all()
        return [
            BackendInfo(
                name=spec.name,
                aliases=tuple(spec.aliases),
                description=spec.description,
                runners_online=self.runners.online_count(spec.name, runners),
                unhealthy=tuple(self.runners.unhealthy_reasons(spec.name, runners)),
            )
            for spec in self.workflows.values()
        ]


def _known_flaky(session: Session, job: Job, result: JobResult | None) -> tuple[KnownFlaky, ...]:
    """Which of a finished job's failing tests earlier jobs found flaky."""
    if result is None or result.accuracy is None or not result.accuracy.failures:
        return ()
    return known_flaky(session, job, {f.test_id for f in result.accuracy.failures})


def _running(session: Session, job: Job) -> dict[str, Any]:
    """What a running job's view adds: its runner's progress, an estimate from its history,
    and the moment of the view."""
    if job.status != JobStatus.running:
        return {}
    progress: Progress | None = None
    if job.progress is not None:
        try:
            progress = Progress.model_validate(job.progress)
        except ValidationError:
            progress = None
    return {
        "progress": progress,
        "estimate_s": queries.usual_duration(session, job),
        "now": utcnow(),
    }
