"""The regression issue through the outbox: a row written in the transaction that changed the
issue (`enqueue_issue`), and what the outbox worker does with it (`IssueSender`): the issue is
rendered when it is sent, from its row's state now, created once (a create retried after an
answer that never came finds it again by its marker) and then edited in place, not sent again
when nothing in it changed. Closing it posts the comment that says why first (once: a retry
finds it by its marker), then closes it, in the same item, so nothing waits behind another
item of the issue."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from service.db.engine import Database, utcnow
from service.db.models import Job, OutboxItem, RegressionIssue
from service.github.client import GitHubClient
from service.history.alerts_text import (
    ISSUE_LABEL,
    IssueRow,
    RowFound,
    issue_marker,
    render_close_comment,
    render_issue_body,
    render_issue_title,
)
from workflows.models import Change

ISSUE = "issue"  # the outbox kind


def issue_key(issue_id: int) -> str:
    return f"issue:{issue_id}"


def note_marker(issue_id: int) -> str:
    return f"<!-- ondemand:issue-note:{issue_id} -->"


def _fresh() -> dict[str, Any]:
    now = utcnow()
    return {"created_at": now, "next_attempt_at": now, "attempts": 0}


def enqueue_issue(db: Database, session: Session, issue: RegressionIssue) -> None:
    """The issue, created or brought up to date when the outbox sends it; an unsent item of it
    already queued stands for this one (it renders the row as it is then)."""
    key = issue_key(issue.id)
    now = utcnow()
    pending = (
        select(OutboxItem.id)
        .where(
            OutboxItem.key == key,
            OutboxItem.kind == ISSUE,
            OutboxItem.done_at.is_(None),
            OutboxItem.attempts == 0,
            or_(OutboxItem.locked_until.is_(None), OutboxItem.locked_until < now),
        )
        .limit(1)
    )
    if session.scalars(db.for_update(pending, skip_locked=True)).first() is not None:
        return
    payload = {"repo": issue.repo, "issue_id": issue.id}
    session.add(OutboxItem(kind=ISSUE, key=key, payload=payload, **_fresh()))


def _change(data: dict[str, Any] | None) -> Change | None:
    if not data:
        return None
    return Change(rounds=max(1, int(data.get("rounds") or 1)), ratio=float(data["ratio"]),
                  low=data.get("low"), high=data.get("high"))  # fmt: skip


def issue_rows(issue: RegressionIssue) -> list[IssueRow]:
    """The issue's rows as the text renders them."""
    rows = []
    for row in issue.rows:
        change = _change(row)
        assert change is not None
        found = RowFound(row["dtype"], row["shape"], row["metric"], row["kind"], change,
                         row["since"], int(row.get("links") or 1))  # fmt: skip
        rows.append(IssueRow(found, row["found_at"], row["job_url"], row.get("recovered_at"),
                             _change(row.get("recovered"))))  # fmt: skip
    return rows


def digest(*parts: str) -> str:
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


class IssueSender:
    """The outbox's sender of the kind (`OutboxWorker`'s `senders`)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def senders(self) -> dict[str, Any]:
        return {ISSUE: self.send_issue}

    def send_issue(self, gh: GitHubClient, item: OutboxItem) -> str:
        issue_id = int(item.payload["issue_id"])
        with self.db.reads() as session:
            issue = session.get(RegressionIssue, issue_id)
            if issue is None:
                return "issue row gone"
            repo, number, last = issue.repo, issue.issue_number, issue.sent_digest
            title = render_issue_title(issue.op, issue.backend)
            threshold = float(issue.rows[-1].get("threshold") or 0.1) if issue.rows else 0.1
            closed = issue.state == "closed"
            rows = issue_rows(issue)
            body = render_issue_body(issue.op, issue.backend, rows, threshold, closed)
            marker = issue_marker(issue.op, issue.backend)
            note = _closing(session, issue, rows) if closed else ""
        state = "closed" if closed else "open"
        sent = digest(title, body, state)
        if number is not None and last == sent:
            return f"issue #{number} unchanged: not sent"
        if number is None and item.attempts > 1:  # an earlier try may have made it
            number = gh.find_issue(repo, ISSUE_LABEL, marker)
        made = number is None
        if number is None:
            number = gh.create_issue(repo, title, body, [ISSUE_LABEL])
            self._store(issue_id, number, None)
        if closed:
            tag = note_marker(issue_id)
            found = gh.find_comment(repo, number, tag) if item.attempts > 1 else None
            if found is None:
                gh.create_comment(repo, number, f"{tag}\n{note}")
        fields: dict[str, Any] = {"state": state}
        if not made:
            fields |= {"title": title, "body": body}
        if closed:
            fields["state_reason"] = "completed"
        if len(fields) > 1 or closed:
            gh.edit_issue(repo, number, **fields)
        self._store(issue_id, number, sent)
        return f"{'created' if made else 'updated'} issue #{number} ({state})"

    def _store(self, issue_id: int, number: int, sent: str | None) -> None:
        with self.db.writes() as session, session.begin():
            issue = session.get(RegressionIssue, issue_id)
            if issue is not None:
                issue.issue_number, issue.sent_digest = number, sent


def _closing(session: Session, issue: RegressionIssue, rows: list[IssueRow]) -> str:
    """The comment that closes the issue: the run that found its last row recovered."""
    job = session.get(Job, issue.closed_job_id) if issue.closed_job_id is not None else None
    sha = job.sha if job is not None else max((r.recovered_at or "" for r in rows), default="")
    return render_close_comment(issue.op, issue.backend, sha, rows)
