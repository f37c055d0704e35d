"""The outbox worker: delivers reactions, replies, result comments, commit statuses and (as
an App) check runs to GitHub, in order per key, with the retry policy; waits out rate limits
(the client pauses every call until `Retry-After` or the reset); never loses an item while
GitHub is down or limiting,
gives up only on answers that cannot change, and never posts a comment twice (a comment's
GitHub id is stored the moment it exists; a retried create first looks for it). A result
comment or check run is rendered when it is sent and not sent again when nothing in it changed
(the digest of what was last sent is stored beside its id): several queued updates of one job
cost one call, not one each, of the installation's hourly budget; while that budget runs low,
the calls that only show a step on the way are left out (`low_budget`). An item GitHub
refuses for a permission the App lacks is kept: parked until the permission comes (tried every
few minutes, and at once when an owner accepts the App's new permissions)."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import TypeVar

from sqlalchemy.orm import Session

from ondemand.retry import RetryPolicy
from report.comment import marker
from report.views import CheckRunUpdate, CommentUpdate
from service.db.engine import Database
from service.db.leases import Due, LeasedRows
from service.db.models import HeadCheck, Job, OutboxItem, ResultComment
from service.github.budget import Budget
from service.github.client import (
    PERMISSION_RETRY,
    GitHubClient,
    GitHubError,
    MissingPermission,
)
from service.publish.low_budget import REACTION_LEFT_OUT, skippable
from service.worker import RowWorker

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_PERMANENT_ATTEMPTS = 3  # a 4xx that will not change: tried this often, then given up

# compose(session, row) -> the result comment now, or None when it has nothing to say
Compose = Callable[[Session, ResultComment], CommentUpdate | None]
# compose_check(session, job) -> the job's check run now (rendered when it is sent)
ComposeCheck = Callable[[Session, Job], CheckRunUpdate]
# compose_head(session, row) -> a head's aggregate check run now
ComposeHead = Callable[[Session, HeadCheck], CheckRunUpdate]
# A sender of a kind another stage writes (the default branch's regression issue): its outcome
Send = Callable[[GitHubClient, OutboxItem], str]


class OutboxWorker(RowWorker[OutboxItem]):
    """Delivers outbox rows to GitHub: in order per key, retried, paused on rate limits. The
    round over due items is `RowWorker`'s, shared with the inbox."""

    name = "outbox"

    def __init__(
        self,
        db: Database,
        github: GitHubClient | None,
        compose: Compose,
        policy: RetryPolicy,
        stopping: threading.Event,
        compose_check: ComposeCheck | None = None,
        compose_head: ComposeHead | None = None,
        busy: Callable[[], bool] | None = None,
        reserve: float = 0.0,
        senders: Mapping[str, Send] | None = None,
    ) -> None:
        """`reserve`: below this share of an installation's hourly budget left, the calls that
        only show a step on the way are left out (0: never). `senders`: how items of further
        kinds are sent, by kind."""
        super().__init__(LeasedRows(db, OutboxItem), policy, stopping, db.outages, busy)
        self.db = db
        self.github = github
        self.compose = compose
        self.compose_check = compose_check
        self.compose_head = compose_head
        self.reserve = reserve
        self.senders = dict(senders or {})
        self.items = self.rows  # the outbox's name for them
        self._thrifty: set[str] = set()  # budgets (`budget_key`) low at their last call

    def run_once(self) -> float | None:
        """Deliver every due item (the first undelivered of each key); returns seconds until the
        next one is due (None: nothing pending, or no GitHub to deliver to)."""
        if self.github is None:
            return None
        return super().run_once()

    def due(self) -> list[Due]:
        """The first undelivered item of each key: a key's items go out in order."""
        heads: dict[str, Due] = {}
        for item in self.items.pending():
            heads.setdefault(item.key, item)
        return list(heads.values())

    def paused_for(self) -> float:
        """While GitHub's rate limit or outage pauses the client, the round stops."""
        return self.github.paused_for() if self.github is not None else 0.0

    def attempt(self, row: OutboxItem) -> str:
        return self._send(row)

    def failed(self, row: OutboxItem, error: Exception) -> float | None:
        if not isinstance(error, GitHubError):
            log.error("outbox item %s (%s) crashed", row.id, row.kind, exc_info=error)
            error = GitHubError(f"internal error: {error}", None)
        return self._failed(row, error)

    def _send(self, item: OutboxItem) -> str:
        gh = self.github
        assert gh is not None  # run_once delivers nothing without a client
        p = item.payload
        if item.kind == "reaction":
            low = self._left_out("reaction", p["repo"])
            if low is not None:
                return f"{REACTION_LEFT_OUT} ({low})"
            gh.add_reaction(p["repo"], int(p["comment_id"]), p["content"])
            return "reacted"
        if item.kind == "status":
            latest = _made_before(item, lambda: gh.latest_status(p["repo"], p["sha"], p["context"]))
            if _stands(latest, p):
                return f"status {p['state']} (found after a retry)"
            gh.create_status(
                p["repo"], p["sha"], p["state"], p["description"], p["context"], p["target_url"]
            )
            return f"status {p['state']}"
        if item.kind == "reply":
            found = _made_before(
                item, lambda: gh.find_comment(p["repo"], int(p["pr_number"]), p["marker"])
            )
            if found is not None:
                return f"reply {found} (found after a retry)"
            return f"reply {gh.create_comment(p['repo'], int(p['pr_number']), p['body'])}"
        if item.kind == "note":
            pr = int(p["pr_number"])
            found = gh.find_comment(p["repo"], pr, p["marker"])
            if found is None:
                return f"note {gh.create_comment(p['repo'], pr, p['body'])}"
            gh.edit_comment(p["repo"], found, p["body"])
            return f"note {found} edited"
        if item.kind == "comment":
            return self._send_comment(gh, item)
        if item.kind == "check":
            return self._send_check(gh, item, Job)
        if item.kind == "head_check":
            return self._send_check(gh, item, HeadCheck)
        if item.kind in self.senders:
            return self.senders[item.kind](gh, item)
        return f"unknown kind {item.kind}: dropped"

    def _send_comment(self, gh: GitHubClient, item: OutboxItem) -> str:
        row_id = int(item.payload["row_id"])
        with self.db.reads() as session:
            row = session.get(ResultComment, row_id)
            if row is None:
                return "comment row gone"
            update = self.compose(session, row)
        if update is None:
            return "nothing to say"
        body, job_id = update.body, update.job_id
        sent = digest(body)
        if row.github_comment_id is not None and row.sent_digest == sent:
            return f"comment {row.github_comment_id} unchanged: not sent"
        shows_job = row.github_comment_id is not None and row.sent_job_id == job_id
        low = self._left_out("comment", row.repo, exists=shows_job, ended=update.ended)
        if low is not None:
            return f"comment {row.github_comment_id}: an edit on the way left out ({low})"
        if row.github_comment_id is None:
            found = _made_before(
                item, lambda: gh.find_comment(row.repo, row.pr_number, marker(row.op, row.backend))
            )
            if found is not None:
                self._store_comment_id(row_id, found)
                row.github_comment_id = found
        if row.github_comment_id is None:
            created = gh.create_comment(row.repo, row.pr_number, body)
            self._store_comment_id(row_id, created, sent, job_id)
            return f"created comment {created}"
        try:
            gh.edit_comment(row.repo, row.github_comment_id, body)
        except GitHubError as exc:
            if exc.status != 404:
                raise
            # Someone deleted the comment: post it again rather than fail forever.
            created = gh.create_comment(row.repo, row.pr_number, body)
            self._store_comment_id(row_id, created, sent, job_id)
            return f"comment {row.github_comment_id} was deleted; created {created}"
        self._store_comment_id(row_id, row.github_comment_id, sent, job_id)
        return f"updated comment {row.github_comment_id}"

    def _send_check(
        self, gh: GitHubClient, item: OutboxItem, model: type[Job] | type[HeadCheck]
    ) -> str:
        """Create the check run of a job (`model` Job, kind "check") or of a head's jobs
        (HeadCheck, kind "head_check"), or update it; its output rendered now."""
        row_id = int(item.payload["head_id" if model is HeadCheck else "job_id"])
        compose = self.compose_head if model is HeadCheck else self.compose_check
        with self.db.reads() as session:
            row = session.get(model, row_id)
            if row is None or compose is None:
                return f"no {model.__tablename__} row {row_id} or no check runs"
            check = compose(session, row)  # type: ignore[arg-type]
            repo, run_id, last_sent = row.repo, row.check_run_id, row.check_sent_digest

        def store(run_id: int, sent: str) -> None:
            with self.db.writes() as session, session.begin():
                found = session.get(model, row_id)
                if found is not None:
                    found.check_run_id, found.check_sent_digest = run_id, sent

        return self._send_check_run(gh, item, repo, check, run_id, last_sent, store)

    def _send_check_run(
        self,
        gh: GitHubClient,
        item: OutboxItem,
        repo: str,
        check: CheckRunUpdate,
        run_id: int | None,
        last_sent: str | None,
        store: Callable[[int, str], None],
    ) -> str:
        """Create the check run `check`, or update run `run_id`; nothing when what it would
        send is what was last sent. `store` keeps the run's id and what was sent."""
        output = {"title": check.title, "summary": check.summary, "text": check.text}
        body: dict[str, object] = {
            "name": check.name,
            "details_url": check.details_url,
            "external_id": check.external_id,
            "status": check.status,
            "output": output,
        }
        if check.conclusion is not None:
            body["conclusion"] = check.conclusion
        sent = digest(json.dumps({**body, "head_sha": check.head_sha}, sort_keys=True))
        if run_id is not None and last_sent == sent:
            return f"check run {run_id} unchanged: not sent"
        ended = check.status == "completed"
        low = self._left_out("check", repo, exists=run_id is not None, ended=ended)
        if low is not None:
            return f"check run {run_id}: an update on the way left out ({low})"
        if run_id is None:
            head, name, external = check.head_sha, check.name, check.external_id
            run_id = _made_before(item, lambda: gh.find_check_run(repo, head, name, external))
        if run_id is not None:
            try:
                gh.update_check_run(repo, run_id, body)
                store(run_id, sent)
                return f"updated check run {run_id} ({check.status})"
            except GitHubError as exc:
                if exc.status != 404:
                    raise
        created = gh.create_check_run(repo, {**body, "head_sha": check.head_sha})
        store(created, sent)
        return f"created check run {created} ({check.status})"

    def _store_comment_id(
        self, row_id: int, comment_id: int, sent: str | None = None, job_id: int | None = None
    ) -> None:
        """The comment's GitHub id, the digest of the body it holds now and the job it shows
        (None: unknown, as for one found after a retry, so the next send edits it)."""
        with self.db.writes() as session, session.begin():
            row = session.get(ResultComment, row_id)
            if row is not None:
                row.github_comment_id, row.sent_digest = comment_id, sent
                row.sent_job_id = job_id

    def _left_out(
        self, kind: str, repo: str, *, exists: bool = False, ended: bool = False
    ) -> Budget | None:
        """The low budget an item of `kind` for `repo` is left out for (`low_budget.skippable`);
        None when it goes out."""
        return self._low(repo) if skippable(kind, exists=exists, ended=ended) else None

    def _low(self, repo: str) -> Budget | None:
        """`repo`'s installation budget when less than the reserve is left (None otherwise);
        logs when an installation's budget turns low and when it is whole again."""
        assert self.github is not None
        budget = self.github.budget(repo)
        owner = self.github.budget_key(repo)
        low = budget is not None and budget.low(self.reserve)
        if low and owner not in self._thrifty:
            self._thrifty.add(owner)
            log.warning(
                "GitHub budget low for %s (%s): reactions and edits on the way are left out; "
                "answers and verdicts still go out",
                owner,
                budget,
            )
        elif not low and owner in self._thrifty:
            self._thrifty.discard(owner)
            log.warning("GitHub budget for %s is above the reserve again (%s)", owner, budget)
        return budget if low else None

    def _failed(self, item: OutboxItem, exc: GitHubError) -> float | None:
        if isinstance(exc, MissingPermission):
            wait = PERMISSION_RETRY.delay(item.attempts)
            first = item.waiting_for != exc.key
            self.items.park(item.id, exc.key, wait, str(exc))
            log.log(
                logging.WARNING if first else logging.INFO,
                "outbox item %s (%s) waits for the App's %s permission (again in %.0fs): %s",
                item.id,
                item.kind,
                exc.key,
                wait,
                exc,
            )
            return wait
        if exc.permanent and item.attempts >= MAX_PERMANENT_ATTEMPTS:
            self.items.give_up(item.id, str(exc))
            log.error("outbox item %s (%s) given up: %s", item.id, item.kind, exc)
            return None
        wait = self.retry(item, exc.retry_after, str(exc))
        quiet = exc.unavailable or exc.rate_limited  # the client logs each pause once
        level = logging.DEBUG if quiet else logging.WARNING
        log.log(
            level, "outbox item %s (%s) failed, retry in %.1fs: %s", item.id, item.kind, wait, exc
        )
        return wait


def digest(text: str) -> str:
    """What was sent, in 64 hex characters: equal digests, equal text."""
    return hashlib.sha256(text.encode()).hexdigest()


def _made_before(item: OutboxItem, find: Callable[[], T | None]) -> T | None:
    """What an earlier attempt of `item` may already have made on GitHub (its write went
    through, then its answer or its replica was lost): looked up with `find` on a retry, so
    that the retry does not make it twice; None on a first attempt, which costs no lookup."""
    return find() if item.attempts > 1 else None


def _stands(latest: dict[str, object] | None, wanted: dict[str, object]) -> bool:
    """Whether the newest status of the context is already the one to post (an earlier try
    posted it and its answer, or its replica, was lost): posting again would add a duplicate."""
    return latest is not None and all(
        latest.get(key) == wanted[key] for key in ("state", "description", "target_url")
    )
