"""The runners: registration (the token kept only as a hash), authentication, health, and
who counts as online."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from service.db.engine import Database, utcnow
from service.db.models import Job, Runner
from workflows.models import JobStatus


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class RunnerRegistry:
    """Registered runner daemons; a runner seen within `online_seconds` counts as online."""

    def __init__(self, db: Database, *, online_seconds: float = 90.0) -> None:
        self.db = db
        self.online_seconds = online_seconds

    def register(
        self,
        name: str,
        backends: Sequence[str],
        labels: Sequence[str] = (),
        slots: int = 1,
        version: str | None = None,
    ) -> tuple[int, str]:
        """A new runner; returns its id and its bearer token (only the hash is kept)."""
        token = secrets.token_urlsafe(32)
        with self.db.writes() as session, session.begin():
            runner = Runner(
                name=name,
                token_hash=hash_token(token),
                backends=list(backends),
                labels=list(labels),
                slots=slots,
                version=version,
                healthy=True,
                created_at=utcnow(),
                last_seen_at=utcnow(),
            )
            session.add(runner)
            session.flush()
            return runner.id, token

    def authenticate(self, token: str) -> Runner | None:
        """The runner of `token`; None for an unknown token or a removed runner's."""
        with self.db.reads() as session:
            return session.scalars(
                select(Runner).where(
                    Runner.token_hash == hash_token(token), Runner.removed_at.is_(None)
                )
            ).first()

    def forget_unseen(self, days: float, now: datetime | None = None) -> list[str]:
        """Remove the runners unseen for `days` that hold no running job; their names. One
        that comes back finds its token refused and registers again."""
        cutoff = (now or utcnow()) - timedelta(days=days)
        with self.db.writes() as session, session.begin():
            holding = select(Job.runner_id).where(Job.status == JobStatus.running)
            gone = session.scalars(
                select(Runner).where(
                    Runner.removed_at.is_(None),
                    Runner.last_seen_at < cutoff,
                    Runner.id.not_in(holding.where(Job.runner_id.is_not(None))),
                )
            ).all()
            for runner in gone:
                runner.removed_at = now or utcnow()
            return [runner.name for runner in gone]

    def deregister(self, runner_id: int) -> bool:
        """Remove a runner (an ephemeral one, after its job): its token stops working and it
        is no longer listed; its jobs keep its name. False while it holds a running job,
        which it must report or hand back first."""
        with self.db.writes() as session, session.begin():
            runner = session.get(Runner, runner_id)
            if runner is None:
                return True
            holding = session.scalars(
                select(Job.id).where(Job.runner_id == runner_id, Job.status == JobStatus.running)
            ).first()
            if holding is not None:
                return False
            runner.removed_at = runner.removed_at or utcnow()
            return True

    def set_health(
        self,
        runner_id: int,
        healthy: bool,
        reason: str | None,
        backends: Sequence[str] | None,
        drained: dict[str, Any] | None = None,
    ) -> None:
        """What the runner says of itself: healthy or why not, and, when its jobs' infrastructure
        errors drained it, its drain (since when, which jobs, which errors)."""
        with self.db.writes() as session, session.begin():
            runner = session.get(Runner, runner_id)
            if runner is None:
                return
            runner.healthy = healthy
            runner.health_reason = None if healthy else (reason or "unhealthy")
            runner.drained = None if healthy else drained
            if drained is not None:
                # Said in `/test help` too: no job's error, which may name a private repository
                # (the dashboard shows them where the job is public).
                jobs = len(drained.get("jobs") or ())
                runner.health_reason = (
                    f"drained: its last {jobs} jobs ended in infrastructure errors"
                )
            if backends:
                runner.backends = list(backends)
            runner.last_seen_at = utcnow()

    def all(self, session: Session | None = None) -> list[Runner]:
        """Every runner not removed; read in `session` when given (a caller inside a write
        transaction must not take a second connection: on SQLite it would wait on its own
        lock's pool)."""
        listed = select(Runner).where(Runner.removed_at.is_(None)).order_by(Runner.id)
        if session is not None:
            return list(session.scalars(listed))
        with self.db.reads() as own:
            return list(own.scalars(listed))

    def online(self, runner: Runner, now: datetime | None = None) -> bool:
        now = now or utcnow()
        return runner.last_seen_at >= now - timedelta(seconds=self.online_seconds)

    def online_count(self, backend: str, runners: Sequence[Runner] | None = None) -> int:
        """Healthy runners serving `backend` seen recently."""
        runners = self.all() if runners is None else runners
        return sum(1 for r in runners if r.healthy and backend in r.backends and self.online(r))

    def unhealthy_reasons(self, backend: str, runners: Sequence[Runner] | None = None) -> list[str]:
        """`name: reason` of the online runners of `backend` whose device check fails or that
        their jobs' infrastructure errors drained."""
        runners = self.all() if runners is None else runners
        return [
            f"{r.name}: {r.health_reason}"
            for r in runners
            if not r.healthy and backend in r.backends and self.online(r)
        ]
