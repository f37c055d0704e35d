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
from service.db.engine import Database
from service.db.leases import LeasedRows
from service.db.models import Delivery
from service.github.client import PERMISSION_RETRY, GitHubError, MissingPermission
from service.receive.handle import DeliveryHandler, RetryLater
from service.worker import RowWorker

log = logging.getLogger(__name__)

MAX_CRASHES = 3  # a delivery the handler crashes on (a bug) is given up after this many tries


class Inbox(RowWorker[Delivery]):
    """Hands each recorded delivery to the handler once; retries it when GitHub could not be
    read. The round over due deliveries is `RowWorker`'s, shared with the outbox."""

    name = "inbox"

    def __init__(
        self,
        db: Database,
        handler: DeliveryHandler,
        policy: RetryPolicy,
        stopping: threading.Event,
        busy: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__(LeasedRows(db, Delivery), policy, stopping, db.outages, busy)
        self.handler = handler
        self.deliveries = self.rows  # the inbox's name for them

    def attempt(self, row: Delivery) -> str:
        outcome = self.handler.handle(
            row.delivery_id, row.event, row.payload or {}, row.received_at
        )
        log.info("delivery %s: %s", row.delivery_id, outcome)
        return outcome

    def finished(self, row: Delivery, outcome: str) -> None:
        if row.event == "installation":
            self.kick()  # new permissions may have released parked deliveries: look again

    def failed(self, row: Delivery, error: Exception) -> float | None:
        """A handler that asked to wait, a missing permission (parked), GitHub's answer (given
        up when it cannot change, else retried), or a crash (a bug: retried a few times)."""
        if isinstance(error, RetryLater):
            self.deliveries.retry(row.id, error.after_s, str(error))
            log.info("delivery %s: %s; again in %.1fs", row.delivery_id, error, error.after_s)
            return error.after_s
        if isinstance(error, MissingPermission):
            return self._park(row, error)
        if isinstance(error, GitHubError):
            if error.permanent:
                self.deliveries.give_up(row.id, str(error))
                log.error("delivery %s failed: %s", row.delivery_id, error)
                return None
            quiet = error.unavailable or error.rate_limited  # the client logs each once
            return self._retry(row, error.retry_after, str(error), quiet=quiet)
        log.error("delivery %s crashed", row.delivery_id, exc_info=error)
        if row.attempts >= MAX_CRASHES:
            self.deliveries.give_up(row.id, repr(error))
            return None
        return self._retry(row, None, repr(error))

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
        wait = self.retry(delivery, retry_after, error)
        log.log(
            logging.DEBUG if quiet else logging.WARNING,
            "delivery %s: retry in %.1fs: %s",
            delivery.delivery_id,
            wait,
            error,
        )
        return wait
