"""What GitHub should be told, as outbox rows written in the caller's transaction (a
transactional outbox): a job change updates the result comment of its (PR, op, backend),
rendered fresh when the outbox delivers it, and sets the job's commit status; a command gets
a reaction and, where it needs one, a reply.

A running job's progress is paced: its comment and status are edited at most once every
`progress_interval_s` (GitHub asks integrators not to edit one thing in bursts) and only when
the progress changed; a change of state (the verdict) goes out at once, pulling in any paced
edit still waiting."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from report.checks import render_check, render_status
from report.comment import render_comment
from report.head_check import render_head_check
from report.views import CheckRunUpdate, CommentUpdate, JobView
from service.db.engine import Database, utcnow
from service.db.models import NO_PULL, HeadCheck, Job, OutboxItem, ResultComment
from service.publish.job_views import JobViews
from service.queue import queries
from workflows.models import JobStatus


def comment_key(row_id: int) -> str:
    return f"comment:{row_id}"


def status_key(job_id: int) -> str:
    return f"status:{job_id}"


def check_key(job_id: int) -> str:
    return f"check:{job_id}"


def head_key(repo: str, sha: str) -> str:
    return f"head:{repo}:{sha}"


def reply_marker(tag: str) -> str:
    return f"<!-- ondemand:reply:{tag} -->"


def note_marker(name: str) -> str:
    return f"<!-- ondemand:note:{name} -->"


class Notices:
    """The queue's `JobListener`, and the composer of a result comment's current text."""

    def __init__(
        self,
        db: Database,
        views: JobViews,
        progress_interval_s: float = 20.0,
        *,
        checks: bool = False,
    ) -> None:
        self.db = db
        self.views = views
        self.progress_interval = timedelta(seconds=progress_interval_s)
        self.checks = checks  # as a GitHub App: a check run per job instead of a status

    # -- the listener -------------------------------------------------------------------

    def job_changed(self, session: Session, job: Job) -> None:
        """Its result comment (a default-branch job has no pull request to comment on: its
        check run or status on the commit says it, and its history the rest), its check run or
        status, and its head's `ondemand` check."""
        if job.pr_number != NO_PULL:
            self._enqueue_comment(session, self._comment_row(session, job))
        self._enqueue_status(session, job)
        self._enqueue_head(session, job.repo, job.sha)

    def head_idle(self, session: Session, repo: str, sha: str, why: str) -> None:
        """Nothing needed testing at `sha` (`why`): its `ondemand` check says success, unless
        jobs ran there (they decide it)."""
        if not self.checks:
            return
        row = self._head_row(session, repo, sha)
        row.idle_reason = why[:200]
        self._enqueue_head(session, repo, sha)

    def job_progressed(self, session: Session, job: Job) -> None:
        """Show the new progress no sooner than one interval after the last progress edit
        (the first: one interval after the job started)."""
        now = utcnow()
        noticed = job.progress_noticed_at
        if noticed is not None and noticed > now:
            due = noticed  # an edit is set for then; it renders the latest progress
        else:
            due = max(now, (noticed or job.started_at or now) + self.progress_interval)
        job.progress_noticed_at = due
        if job.pr_number != NO_PULL:
            self._enqueue_comment(session, self._comment_row(session, job), due)
        self._enqueue_status(session, job, due)

    def queue_moved(self, session: Session, jobs: Sequence[Job]) -> None:
        """Their comments show a queue position: refresh them (statuses stay as they are)."""
        for job in jobs:
            if job.pr_number != NO_PULL:
                self._enqueue_comment(session, self._comment_row(session, job))

    # -- what the outbox delivers --------------------------------------------------------

    def comment(self, session: Session, row: ResultComment) -> CommentUpdate | None:
        """A result comment now: its latest job, earlier ones as history."""
        jobs = queries.target_jobs(session, row.repo, row.pr_number, row.op, row.backend)
        if not jobs:
            return None
        latest = jobs[-1]
        views = self.views.target(session, latest)
        body = render_comment(views[-1], views[:-1])
        return CommentUpdate(body, latest.id, JobStatus(latest.status).final)

    def check_run(self, session: Session, job: Job) -> CheckRunUpdate:
        """The current check run of a job."""
        return render_check(self.views.view(session, job))

    def head_check(self, session: Session, row: HeadCheck) -> CheckRunUpdate:
        """The current `ondemand` check run of a head: its jobs' verdict."""
        views = self._head_views(session, row.repo, row.sha)
        return render_head_check(row.sha, views, self._head_url(views), row.idle_reason)

    def _head_views(self, session: Session, repo: str, sha: str) -> list[JobView]:
        jobs = session.scalars(
            select(Job).where(Job.repo == repo, Job.sha == sha).order_by(Job.id)
        ).all()
        return [self.views.view(session, job) for job in jobs]

    def _head_url(self, views: list[JobView]) -> str:
        """Where the check's Details go: the first job's page, else the dashboard."""
        return views[0].job_url if views else self.views.links.public_url + "/"

    # -- rows ---------------------------------------------------------------------------

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

    def _head_row(self, session: Session, repo: str, sha: str) -> HeadCheck:
        query = select(HeadCheck).where(HeadCheck.repo == repo, HeadCheck.sha == sha)
        row = session.scalars(query).first()
        if row is not None:
            return row
        try:
            with session.begin_nested():
                row = HeadCheck(repo=repo, sha=sha)
                session.add(row)
        except IntegrityError:
            row = session.scalars(query).one()
        return row

    def _enqueue_head(self, session: Session, repo: str, sha: str) -> None:
        """As an App: the head's `ondemand` check run, rendered when it is sent. (A token
        cannot make check runs; its per-job statuses stay as they are.)"""
        if not self.checks:
            return
        row = self._head_row(session, repo, sha)
        payload = {"repo": repo, "head_id": row.id}
        self._enqueue(session, "head_check", head_key(repo, sha), payload, None)

    def _pending(self, session: Session, key: str) -> OutboxItem | None:
        """A queued, not yet started item of `key` that a new one may replace. One another
        transaction holds is skipped, never waited for (a new item follows it): two claims
        each refresh the other's comment, and waiting would deadlock them."""
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
        return session.scalars(self.db.for_update(query, skip_locked=True)).first()

    def _enqueue(
        self, session: Session, kind: str, key: str, payload: dict[str, Any], due: datetime | None
    ) -> None:
        """An outbox item of `key` due at `due` (None: now). A queued, unsent item of the same
        key stands for it: it takes the newest `payload` (a comment or check run is rendered
        when sent anyway), and is brought forward to now when `due` is None (a change of state
        does not wait behind a paced progress edit)."""
        pending = self._pending(session, key)
        if pending is None:
            session.add(OutboxItem(kind=kind, key=key, payload=payload, **_fresh(due)))
            return
        if pending.payload != payload:
            pending.payload = payload
        if due is None:
            pending.next_attempt_at = min(pending.next_attempt_at, utcnow())

    def _enqueue_comment(
        self, session: Session, row: ResultComment, due: datetime | None = None
    ) -> None:
        payload = {"repo": row.repo, "pr_number": row.pr_number, "row_id": row.id}
        self._enqueue(session, "comment", comment_key(row.id), payload, due)

    def _enqueue_status(self, session: Session, job: Job, due: datetime | None = None) -> None:
        if self.checks:  # as an App: the check run, rendered when it is sent
            payload = {"repo": job.repo, "job_id": job.id}
            self._enqueue(session, "check", check_key(job.id), payload, due)
            return
        update = render_status(self.views.view(session, job))
        payload = {
            "repo": job.repo,
            "sha": job.sha,
            "state": update.state,
            "description": update.description,
            "context": update.context,
            "target_url": update.target_url,
        }
        self._enqueue(session, "status", status_key(job.id), payload, due)


def _fresh(due: datetime | None = None) -> dict[str, Any]:
    now = utcnow()
    return {"created_at": now, "next_attempt_at": due or now, "attempts": 0}


def _enqueue_once(
    session: Session, kind: str, key: str, dedupe: str, payload: dict[str, Any]
) -> None:
    """An outbox item of `key`, once for `dedupe`: the same notice asked for again (a
    delivery processed a second time) adds nothing."""
    if session.scalars(select(OutboxItem.id).where(OutboxItem.dedupe_key == dedupe)).first():
        return
    session.add(OutboxItem(kind=kind, key=key, dedupe_key=dedupe, payload=payload, **_fresh()))


def _comment_payload(repo: str, pr_number: int, marker: str, body: str) -> dict[str, Any]:
    """A comment the outbox posts (or finds again by `marker`, its first line)."""
    return {"repo": repo, "pr_number": pr_number, "marker": marker, "body": f"{marker}\n{body}"}


def enqueue_reaction(session: Session, repo: str, comment_id: int, content: str) -> None:
    """A reaction on a command comment (once per comment and content)."""
    payload = {"repo": repo, "comment_id": comment_id, "content": content}
    key = f"reaction:{repo}:{comment_id}"
    _enqueue_once(session, "reaction", key, f"{key}:{content}", payload)


def enqueue_reply(session: Session, repo: str, pr_number: int, tag: str, body: str) -> None:
    """A one-off reply comment; `tag` (e.g. the delivery id) makes it once only."""
    key = f"reply:{repo}:{tag}"
    payload = _comment_payload(repo, pr_number, reply_marker(tag), body)
    _enqueue_once(session, "reply", key, key, payload)


def note_key(repo: str, pr_number: int, name: str) -> str:
    return f"note:{repo}:{pr_number}:{name}"


def has_note(session: Session, repo: str, pr_number: int, name: str) -> bool:
    """Whether the pull request's `name` note was ever written."""
    key = note_key(repo, pr_number, name)
    return session.scalars(select(OutboxItem.id).where(OutboxItem.key == key)).first() is not None


def enqueue_note(
    session: Session, repo: str, pr_number: int, name: str, tag: str, body: str
) -> None:
    """The pull request's one `name` note, created or edited in place to say `body`; `tag`
    (e.g. the head it is about) makes each version once only. Versions go out in order."""
    key = note_key(repo, pr_number, name)
    payload = _comment_payload(repo, pr_number, note_marker(name), body)
    _enqueue_once(session, "note", key, f"{key}:{tag}", payload)
