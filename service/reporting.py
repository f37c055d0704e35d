"""Job state → what GitHub should show. The store calls `Reporter.job_changed` inside the
transaction that changed a job; it adds outbox rows there (a transactional outbox): the
result comment of (PR, op, backend), rendered fresh when the outbox delivers it, and the job's
commit status, rendered now."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError
from sqlalchemy import or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from service.db import utcnow
from service.models import Job, OutboxItem, ResultComment
from service.report import BackendInfo, JobView, render_comment, render_status
from workflows.models import JobResult, JobStatus

if TYPE_CHECKING:
    from service.context import Context


def comment_key(row_id: int) -> str:
    return f"comment:{row_id}"


def status_key(job_id: int) -> str:
    return f"status:{job_id}"


class Reporter:
    """Builds JobViews and enqueues the outbox rows of a job change."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx

    # -- views --------------------------------------------------------------------------

    def view(self, session: Session, job: Job, runners_online: int | None = None) -> JobView:
        store, settings = self.ctx.store, self.ctx.settings
        result: JobResult | None = None
        if job.result is not None:
            try:
                result = JobResult.model_validate(job.result)
            except ValidationError:
                result = None
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
            queue_position=store.queue_position(session, job),
            runners_online=(
                store.runners_online(job.backend) if runners_online is None else runners_online
            ),
            job_url=settings.job_url(job.id),
            log_url=settings.log_url(job.id),
            result=result,
            reason=job.reason,
            attempt=job.attempt,
        )

    def backends(self) -> list[BackendInfo]:
        runners = self.ctx.store.runners()
        return [
            BackendInfo(
                name=spec.name,
                aliases=tuple(spec.aliases),
                description=spec.description,
                runners_online=self.ctx.store.runners_online(spec.name, runners),
                unhealthy=tuple(self.ctx.store.unhealthy_reasons(spec.name, runners)),
            )
            for spec in self.ctx.workflows.values()
        ]

    def comment_body(self, session: Session, row: ResultComment) -> str | None:
        """The current text of a result comment: its latest job, earlier ones as history."""
        jobs = self.ctx.store.triple_jobs(session, row.repo, row.pr_number, row.op, row.backend)
        if not jobs:
            return None
        online = self.ctx.store.runners_online(row.backend)
        views = [self.view(session, job, online) for job in jobs]
        return render_comment(views[-1], views[:-1])

    # -- the listener -------------------------------------------------------------------

    def job_changed(self, session: Session, job: Job) -> None:
        row = self._comment_row(session, job)
        self._enqueue_comment(session, row)
        self._enqueue_status(session, job)

    def queue_moved(self, session: Session, jobs: Sequence[Job]) -> None:
        """Their comments show a queue position: refresh them (statuses stay as they are)."""
        for job in jobs:
            self._enqueue_comment(session, self._comment_row(session, job))

    def _comment_row(self, session: Session, job: Job) -> ResultComment:
        query = select(ResultComment).where(
            ResultComment.repo == job.repo,
            ResultComment.pr_number == job.pr_number,
            ResultComment.op == job.op,
            ResultComment.backend == job.backend,
        )
        row = session.scalars(query).first()
        if row is not None:
            return row
        try:
            with session.begin_nested():
                row = ResultComment(
                    repo=job.repo, pr_number=job.pr_number, op=job.op, backend=job.backend
                )
                session.add(row)
        except IntegrityError:
            row = session.scalars(query).one()
        return row

    def _pending(self, session: Session, key: str) -> OutboxItem | None:
        """A queued, not yet started item of `key` that a new one may replace."""
        now = utcnow()
        query = (
            select(OutboxItem)
            .where(
                OutboxItem.key == key,
                OutboxItem.done_at.is_(None),
                OutboxItem.attempts == 0,
                or_(OutboxItem.locked_until.is_(None), OutboxItem.locked_until < now),
            )
            .order_by(OutboxItem.id.desc())
            .limit(1)
        )
        if self.ctx.store.postgres:
            query = query.with_for_update()
        return session.scalars(query).first()

    def _enqueue_comment(self, session: Session, row: ResultComment) -> None:
        key = comment_key(row.id)
        if self._pending(session, key) is not None:
            return  # it renders the comment when it is delivered: the change will be in it
        payload = {"repo": row.repo, "pr_number": row.pr_number, "row_id": row.id}
        session.add(OutboxItem(kind="comment", key=key, payload=payload, **_fresh()))

    def _enqueue_status(self, session: Session, job: Job) -> None:
        update = render_status(self.view(session, job))
        payload = {
            "repo": job.repo,
            "sha": job.sha,
            "state": update.state,
            "description": update.description,
            "context": update.context,
            "target_url": update.target_url,
        }
        key = status_key(job.id)
        pending = self._pending(session, key)
        if pending is not None:
            pending.payload = payload  # only the newest state matters
            return
        session.add(OutboxItem(kind="status", key=key, payload=payload, **_fresh()))


def _fresh() -> dict[str, Any]:
    now = utcnow()
    return {"created_at": now, "next_attempt_at": now, "attempts": 0}


def enqueue_reaction(session: Session, repo: str, comment_id: int, content: str) -> None:
    """A reaction on a command comment (once per comment and content)."""
    dedupe = f"reaction:{repo}:{comment_id}:{content}"
    if session.scalars(select(OutboxItem.id).where(OutboxItem.dedupe_key == dedupe)).first():
        return
    payload = {"repo": repo, "comment_id": comment_id, "content": content}
    session.add(
        OutboxItem(
            kind="reaction",
            key=f"reaction:{repo}:{comment_id}",
            dedupe_key=dedupe,
            payload=payload,
            **_fresh(),
        )
    )


def reply_marker(tag: str) -> str:
    return f"<!-- ondemand:reply:{tag} -->"


def enqueue_reply(session: Session, repo: str, pr_number: int, tag: str, body: str) -> None:
    """A one-off reply comment; `tag` (e.g. the delivery id) makes it once only."""
    dedupe = f"reply:{repo}:{tag}"
    if session.scalars(select(OutboxItem.id).where(OutboxItem.dedupe_key == dedupe)).first():
        return
    marker = reply_marker(tag)
    payload = {
        "repo": repo,
        "pr_number": pr_number,
        "marker": marker,
        "body": f"{marker}\n{body}",
    }
    session.add(
        OutboxItem(
            kind="reply", key=f"reply:{repo}:{tag}", dedupe_key=dedupe, payload=payload, **_fresh()
        )
    )
