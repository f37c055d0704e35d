"""The outbox worker: delivers reactions, replies, result comments and commit statuses to
GitHub, in order per key, with backoff; honours `Retry-After` and rate-limit resets (pausing
every call); never loses an item while GitHub is down and never posts a comment twice (a
comment's GitHub id is stored the moment it exists; a retried create first looks for it)."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sqlalchemy import or_, select, update

from service.db import utcnow
from service.github import GitHubClient, GitHubError
from service.models import OutboxItem, ResultComment
from service.report import marker
from service.worker import Worker

if TYPE_CHECKING:
    from service.context import Context

log = logging.getLogger(__name__)

LOCK_SECONDS = 120
MAX_PERMANENT_ATTEMPTS = 3  # a 4xx that will not change: tried this often, then given up
RATE_LIMIT_STATUSES = frozenset({403, 429})


def backoff(attempts: int, cap: float) -> float:
    """Seconds before retry number `attempts` + 1: 1, 2, 4, … up to `cap`."""
    return float(min(cap, 2 ** max(0, attempts - 1)))


class OutboxWorker(Worker):
    """Delivers outbox rows to GitHub: in order per key, retried with backoff, paused on rate
    limits."""

    name = "outbox"

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx.stopping)
        self.ctx = ctx
        self.paused_until: datetime | None = None

    @property
    def github(self) -> GitHubClient | None:
        return self.ctx.github

    def run_once(self) -> float | None:
        """Deliver every due item (the first undelivered of each key); returns seconds until the
        next one is due (None: nothing pending)."""
        if self.github is None:
            return None
        now = utcnow()
        if self.paused_until is not None and now < self.paused_until:
            return (self.paused_until - now).total_seconds()
        with self.ctx.sessions() as session:
            pending = session.scalars(
                select(OutboxItem).where(OutboxItem.done_at.is_(None)).order_by(OutboxItem.id)
            ).all()
        heads: dict[str, OutboxItem] = {}
        for item in pending:
            heads.setdefault(item.key, item)
        next_due: float | None = None
        for item in heads.values():
            if self.ctx.stopping.is_set():
                break
            due = item.next_attempt_at
            if item.locked_until is not None and item.locked_until > due:
                due = item.locked_until
            if due > utcnow():
                wait = (due - utcnow()).total_seconds()
                next_due = wait if next_due is None else min(next_due, wait)
                continue
            retry_in = self._deliver(item.id)
            if retry_in is not None:
                next_due = retry_in if next_due is None else min(next_due, retry_in)
            if self.paused_until is not None and utcnow() < self.paused_until:
                return (self.paused_until - utcnow()).total_seconds()
        return next_due

    def _lock(self, item_id: int) -> OutboxItem | None:
        now = utcnow()
        with self.ctx.writes() as session, session.begin():
            locked = session.execute(
                update(OutboxItem)
                .where(
                    OutboxItem.id == item_id,
                    OutboxItem.done_at.is_(None),
                    or_(OutboxItem.locked_until.is_(None), OutboxItem.locked_until < now),
                )
                .values(
                    locked_until=now + timedelta(seconds=LOCK_SECONDS),
                    attempts=OutboxItem.attempts + 1,
                )
                .execution_options(synchronize_session=False)
            ).rowcount
            if locked != 1:
                return None
            return session.get(OutboxItem, item_id)

    def _deliver(self, item_id: int) -> float | None:
        """Try one item; returns seconds until its retry, or None when it is finished."""
        item = self._lock(item_id)
        if item is None:
            return None
        try:
            outcome = self._send(item)
        except GitHubError as exc:
            return self._failed(item, exc)
        except Exception as exc:
            log.exception("outbox item %s (%s) crashed", item.id, item.kind)
            return self._failed(item, GitHubError(f"internal error: {exc}", None))
        self._finish(item.id, outcome)
        return None

    def _send(self, item: OutboxItem) -> str:
        gh = self.github
        assert gh is not None
        p = item.payload
        if item.kind == "reaction":
            gh.add_reaction(p["repo"], int(p["comment_id"]), p["content"])
            return "reacted"
        if item.kind == "status":
            gh.create_status(
                p["repo"], p["sha"], p["state"], p["description"], p["context"], p["target_url"]
            )
            return f"status {p['state']}"
        if item.kind == "reply":
            if item.attempts > 1:
                found = gh.find_comment(p["repo"], int(p["pr_number"]), p["marker"])
                if found is not None:
                    return f"reply {found} (found after a retry)"
            return f"reply {gh.create_comment(p['repo'], int(p['pr_number']), p['body'])}"
        if item.kind == "comment":
            return self._send_comment(gh, item)
        return f"unknown kind {item.kind}: dropped"

    def _send_comment(self, gh: GitHubClient, item: OutboxItem) -> str:
        row_id = int(item.payload["row_id"])
        reporter = self.ctx.reporter
        with self.ctx.sessions() as session:
            row = session.get(ResultComment, row_id)
            if row is None:
                return "comment row gone"
            body = reporter.comment_body(session, row) if reporter is not None else None
        if body is None:
            return "nothing to say"
        if row.github_comment_id is None and item.attempts > 1:
            found = gh.find_comment(row.repo, row.pr_number, marker(row.op, row.backend))
            if found is not None:
                self._store_comment_id(row_id, found)
                row.github_comment_id = found
        if row.github_comment_id is None:
            created = gh.create_comment(row.repo, row.pr_number, body)
            self._store_comment_id(row_id, created)
            return f"created comment {created}"
        try:
            gh.edit_comment(row.repo, row.github_comment_id, body)
        except GitHubError as exc:
            if exc.status != 404:
                raise
            # Someone deleted the comment: post it again rather than fail forever.
            created = gh.create_comment(row.repo, row.pr_number, body)
            self._store_comment_id(row_id, created)
            return f"comment {row.github_comment_id} was deleted; created {created}"
        return f"updated comment {row.github_comment_id}"

    def _store_comment_id(self, row_id: int, comment_id: int) -> None:
        with self.ctx.writes() as session, session.begin():
            row = session.get(ResultComment, row_id)
            if row is not None:
                row.github_comment_id = comment_id

    def _finish(self, item_id: int, outcome: str) -> None:
        with self.ctx.writes() as session, session.begin():
            item = session.get(OutboxItem, item_id)
            if item is not None:
                item.done_at = utcnow()
                item.locked_until = None
                item.outcome = outcome
                item.last_error = None

    def _failed(self, item: OutboxItem, exc: GitHubError) -> float | None:
        now = utcnow()
        rate_limited = exc.status in RATE_LIMIT_STATUSES and exc.retry_after is not None
        if exc.status == 429 or rate_limited:
            wait = exc.retry_after if exc.retry_after is not None else 60.0
            self.paused_until = now + timedelta(seconds=wait)
        elif exc.retry_after is not None:
            wait = exc.retry_after
        else:
            wait = backoff(item.attempts, self.ctx.settings.outbox_max_backoff_s)
        give_up = exc.permanent and item.attempts >= MAX_PERMANENT_ATTEMPTS
        with self.ctx.writes() as session, session.begin():
            row = session.get(OutboxItem, item.id)
            if row is None:
                return None
            row.locked_until = None
            row.last_error = str(exc)[:2000]
            if give_up:
                row.done_at = now
                row.outcome = f"gave up: {exc}"[:2000]
                log.error("outbox item %s (%s) given up: %s", item.id, item.kind, exc)
                return None
            row.next_attempt_at = now + timedelta(seconds=wait)
        log.warning("outbox item %s (%s) failed, retry in %.1fs: %s", item.id, item.kind, wait, exc)
        return wait
