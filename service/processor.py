"""The command processor: works through recorded deliveries (the durable inbox) in order,
right after the webhook records them and again at startup for any a crash left behind.
GitHub being down delays a delivery (retried with backoff); it never loses one."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING

from sqlalchemy import or_, select, update

from service.db import utcnow
from service.github import GitHubError
from service.handlers import Handlers
from service.models import Delivery
from service.worker import Worker

if TYPE_CHECKING:
    from service.context import Context

log = logging.getLogger(__name__)

LOCK_SECONDS = 120
MAX_ATTEMPTS = 8  # then the delivery is marked failed with its last error


class Processor(Worker):
    """Works through the webhook inbox: each recorded delivery is handled once, retried when
    GitHub could not be read."""

    name = "commands"

    def __init__(self, ctx: Context) -> None:
        super().__init__(ctx.stopping)
        self.ctx = ctx
        self.handlers = Handlers(ctx)

    def run_once(self) -> float | None:
        """Process every due delivery; returns seconds until a retry is due (None: none)."""
        with self.ctx.sessions() as session:
            rows = session.execute(
                select(Delivery.id, Delivery.next_attempt_at)
                .where(Delivery.processed_at.is_(None))
                .order_by(Delivery.id)
            ).all()
        next_due: float | None = None
        for delivery_id, due in rows:
            if self.ctx.stopping.is_set():
                break
            now = utcnow()
            if due is not None and due > now:
                wait = (due - now).total_seconds()
                next_due = wait if next_due is None else min(next_due, wait)
                continue
            retry = self.process(delivery_id)
            if retry is not None:
                next_due = retry if next_due is None else min(next_due, retry)
        return next_due

    def _lock(self, row_id: int) -> Delivery | None:
        now = utcnow()
        with self.ctx.writes() as session, session.begin():
            got = session.execute(
                update(Delivery)
                .where(
                    Delivery.id == row_id,
                    Delivery.processed_at.is_(None),
                    or_(Delivery.next_attempt_at.is_(None), Delivery.next_attempt_at <= now),
                )
                .values(
                    next_attempt_at=now + timedelta(seconds=LOCK_SECONDS),
                    attempts=Delivery.attempts + 1,
                )
                .execution_options(synchronize_session=False)
            ).rowcount
            return session.get(Delivery, row_id) if got == 1 else None

    def process(self, row_id: int) -> float | None:
        """Handle one delivery; returns seconds until its retry, None when finished."""
        delivery = self._lock(row_id)
        if delivery is None:
            return None
        try:
            outcome = self.handlers.handle(
                delivery.delivery_id, delivery.event, delivery.payload or {}
            )
        except GitHubError as exc:
            if exc.permanent or delivery.attempts >= MAX_ATTEMPTS:
                return self._finish(row_id, f"failed: {exc}")
            wait = exc.retry_after or min(60.0, 2.0 ** (delivery.attempts - 1))
            return self._retry(row_id, wait, str(exc))
        except Exception as exc:
            log.exception("delivery %s crashed", delivery.delivery_id)
            if delivery.attempts >= 3:
                return self._finish(row_id, f"failed: {exc!r}")
            return self._retry(row_id, 2.0**delivery.attempts, repr(exc))
        log.info("delivery %s: %s", delivery.delivery_id, outcome)
        return self._finish(row_id, outcome)

    def _finish(self, row_id: int, outcome: str) -> None:
        with self.ctx.writes() as session, session.begin():
            row = session.get(Delivery, row_id)
            if row is not None:
                row.processed_at = utcnow()
                row.outcome = outcome[:4000]
        return None

    def _retry(self, row_id: int, wait: float, error: str) -> float:
        with self.ctx.writes() as session, session.begin():
            row = session.get(Delivery, row_id)
            if row is not None:
                row.next_attempt_at = utcnow() + timedelta(seconds=wait)
                row.outcome = f"retrying: {error}"[:4000]
        log.warning("delivery %s: retry in %.1fs: %s", row_id, wait, error)
        return wait
