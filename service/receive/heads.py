"""The heads pull requests had, as recorded from `pull_request` events and from the service's
own reads: what `approval.approved_head` judges a command against."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from service.db.engine import Database
from service.db.models import PullHead
from service.receive.approval import HeadChange

MAX_KEPT = 200  # changes read per pull request: more than any real PR has


class PullHeads:
    def __init__(self, db: Database) -> None:
        self.db = db

    def record(
        self, repo: str, pr_number: int, sha: str, since: datetime, *, event: str, seen: bool
    ) -> None:
        """Note that the PR's head was `sha` from `since` (the same note twice is one)."""
        try:
            with self.db.writes() as session, session.begin():
                exists = session.scalars(
                    select(PullHead.id).where(
                        PullHead.repo == repo,
                        PullHead.pr_number == pr_number,
                        PullHead.sha == sha,
                        PullHead.since == since,
                        PullHead.seen == seen,
                    )
                ).first()
                if exists is None:
                    session.add(
                        PullHead(
                            repo=repo,
                            pr_number=pr_number,
                            sha=sha,
                            since=since,
                            seen=seen,
                            event=event,
                        )
                    )
        except IntegrityError:
            pass  # a concurrent replica wrote the same note

    def changes(self, repo: str, pr_number: int) -> list[HeadChange]:
        with self.db.reads() as session:
            rows = session.scalars(
                select(PullHead)
                .where(PullHead.repo == repo, PullHead.pr_number == pr_number)
                .order_by(PullHead.since.desc())
                .limit(MAX_KEPT)
            ).all()
        return [HeadChange(r.sha, r.since, seen=r.seen, opened=r.event == "opened") for r in rows]

    def seen_before(self, repo: str, pr_number: int, sha: str) -> bool:
        """Whether the service has read `sha` as this PR's head before."""
        with self.db.reads() as session:
            return (
                session.scalars(
                    select(PullHead.id).where(
                        PullHead.repo == repo,
                        PullHead.pr_number == pr_number,
                        PullHead.sha == sha,
                        PullHead.seen.is_(True),
                    )
                ).first()
                is not None
            )
