"""The inbox worker: works through recorded deliveries in order, right after the webhook
records them and again at start-up for any a crash left behind. GitHub being down, slow or
rate-limiting delays a delivery (retried with the retry policy, for as long as it takes); only
an answer that cannot change ends it unprocessed. A refusal for a permission the App lacks is
not one: the delivery is parked until the permission comes (retried every few minutes, and at
once when an owner accepts the App's new permissions), and its pull request is told once."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from ondemand.retry import RetryPolicy
from service.db.engine import Database, utcnow
from service.db.leases import LeasedRows
from service.db.models import Delivery
from service.db.outage import is_transient
from service.github.client import PERMISSION_RETRY, GitHubError, MissingPermission
from service.receive.handle import DeliveryHandler, RetryLater
from service.worker import Worker

log = logging.getLogger(__name__)

MAX_CRASHES = 3  # a delivery the handler crashes on (a bug) is given up after this many tries


class Inbox(Worker):
    """Hands each recorded delivery to the handler once; retries it when GitHub could not be
    read."""

    name = "inbox"

    def __init__(
        self,
        db: Database,
        handler: DeliveryHandler,
        policy: RetryPolicy,
        stopping: threading.Event,
        busy: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__(stopping, db.outages, busy)
        self.handler = handler
        self.policy = policy
        self.deliveries = LeasedRows(db, Delivery)

    def run_once(self) -> float | None:
        """Process every due delivery; returns seconds until a retry is due (None: none)."""
        next_due: float | None = None
        for row in self.deliveries.pending():
            if self.stopping.is_set():
                break
            due = self.deliveries.due_at(row)
            now = utcnow()
            if due > now:
                wait = (due - now).total_seconds()
                next_due = wait if next_due is None else min(next_due, wait)
                continue
            with self.paced():
                retry = self.process(row.id)
            if retry is not None:
                next_due = retry if next_due is None else min(next_due, retry)
        return next_due

    def process(self, row_id: int) -> float | None:
        """Handle one delivery; returns seconds until its retry, None when finished."""
        delivery = self.deliveries.take(row_id)
        if delivery is None:
            return None
        try:
            with self.deliveries.held(row_id):
                outcome = self.handler.handle(
                    delivery.delivery_id,
                    delivery.event,
                    delivery.payload or {},
                    delivery.received_at,
                )
        except RetryLater as exc:
            self.deliveries.retry(row_id, exc.after_s, str(exc))
            log.info("delivery %s: %s; again in %.1fs", delivery.delivery_id, exc, exc.after_s)
            return exc.after_s
        except MissingPermission as exc:
            return self._park(delivery, exc)
        except GitHubError as exc:
            if exc.permanent:
                self.deliveries.give_up(row_id, str(exc))
                log.error("delivery %s failed: %s", delivery.delivery_id, exc)
                return None
            quiet = exc.unavailable or exc.rate_limited  # the client logs each once
            return self._retry(delivery, exc.retry_after, str(exc), quiet=quiet)
        except Exception as exc:
            if is_transient(exc):
                raise  # not this delivery's fault: the round is retried, nothing is counted
            log.exception("delivery %s crashed", delivery.delivery_id)
            if delivery.attempts >= MAX_CRASHES:
                self.deliveries.give_up(row_id, repr(exc))
                return None
            return self._retry(delivery, None, repr(exc))
        log.info("delivery %s: %s", delivery.delivery_id, outcome)
        self.deliveries.finish(row_id, outcome)
        if delivery.event == "installation":
            self.kick()  # new permissions may have released parked deliveries: look again
        return None

    def _park(self, delivery: Delivery, exc: MissingPermission) -> float:
        """Wait for the permission GitHub said is missing; the first time, tell the pull
        request (once: the reply is keyed by the delivery) and log it."""
        wait = PERMISSION_RETRY.delay(delivery.attempts)
        first = delivery.waiting_for != exc.key
        self.deliveries.park(delivery.id, exc.key, wait, str(exc))
        if first:
            self.handler.permission_missing(
                delivery.delivery_id, delivery.event, delivery.payload or {}, exc
            )
        log.log(
            logging.WARNING if first else logging.INFO,
            "delivery %s waits for the App's %s permission (again in %.0fs): %s",
            delivery.delivery_id,
            exc.key,
            wait,
            exc,
        )
        return wait

    def _retry(
        self, delivery: Delivery, retry_after: float | None, error: str, quiet: bool = False
    ) -> float:
        """Try again later; `quiet` while GitHub is down or rate-limits (the client logs each
        pause once)."""
        wait = self.policy.delay(delivery.attempts, retry_after)
        self.deliveries.retry(delivery.id, wait, error)
        log.log(
            logging.DEBUG if quiet else logging.WARNING,
            "delivery %s: retry in %.1fs: %s",
            delivery.delivery_id,
            wait,
            error,
        )
        return wait
