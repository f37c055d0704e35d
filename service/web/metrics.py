"""`GET /metrics` in Prometheus' text format (prometheus-client), on a registry of the app's
own (tests start many apps in one process).

What the database knows is read at scrape time, so every replica reports the same totals:
jobs by state, queue depth and the oldest wait per backend, how long jobs waited and ran
(histograms by backend and state), the inbox's deliveries by outcome, the outbox's backlog
and its oldest item's age, runners online per backend. What only this process sees is
counted here: webhook requests by answer and how long the webhook took to answer, the rows
its pruner deleted, and GitHub's hourly call budget as GitHub last stated it to it."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from service.db.engine import Database, utcnow
from service.db.models import Delivery, OutboxItem
from service.github.budget import Budget
from service.queue import queries
from service.queue.retention import Pruned
from service.queue.runners import RunnerRegistry

# The pruner's counts by label: (kind, field of `Pruned`).
PRUNED_KINDS = (
    ("jobs", "jobs"),
    ("logs", "logs"),
    ("log_chunks", "chunks"),
    ("deliveries", "deliveries"),
    ("outbox_items", "outbox"),
)
JOB_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200)
WEBHOOK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)


def histogram(
    name: str, doc: str, labels: Sequence[str], samples: Iterable[tuple[tuple[str, ...], float]]
) -> HistogramMetricFamily:
    """A histogram over `samples` ((label values, value)) with the job buckets."""
    grouped: dict[tuple[str, ...], list[float]] = {}
    for key, value in samples:
        grouped.setdefault(key, []).append(value)
    family = HistogramMetricFamily(name, doc, labels=list(labels))
    for key, values in sorted(grouped.items()):
        buckets = [(str(float(b)), sum(1 for v in values if v <= b)) for b in JOB_BUCKETS]
        buckets.append(("+Inf", len(values)))
        family.add_metric(list(key), buckets, sum(values))
    return family


def _age(oldest: datetime | None, now: datetime) -> float:
    return max((now - oldest).total_seconds(), 0.0) if oldest is not None else 0.0


class DatabaseCollector(Collector):
    """The gauges and histograms read from the database at each scrape."""

    def __init__(self, db: Database, runners: RunnerRegistry, backends: Iterable[str]) -> None:
        self.db = db
        self.runners = runners
        self.backends = sorted(backends)

    def collect(self) -> Iterator[Metric]:
        now = utcnow()
        with self.db.reads() as session:
            counts = queries.job_counts(session)
            depths = queries.queue_depths(session)
            waits = queries.queue_waits(session)
            durations = queries.finished_durations(session)
            deliveries = queries.delivery_outcomes(session)
            inbox = queries.backlog(session, Delivery)
            outbox = queries.backlog(session, OutboxItem)
        registered = self.runners.all()

        jobs = GaugeMetricFamily("ondemand_jobs", "Jobs by state", labels=["state"])
        for state, count in sorted(counts.items()):
            jobs.add_metric([state], count)
        yield jobs

        by_backend: Mapping[str, tuple[int, datetime | None]] = {
            b: (n, oldest) for b, n, oldest in depths
        }
        backends = sorted(set(self.backends) | set(by_backend))
        depth = GaugeMetricFamily(
            "ondemand_queue_depth", "Queued jobs per backend", labels=["backend"]
        )
        oldest = GaugeMetricFamily(
            "ondemand_queue_oldest_wait_seconds",
            "How long the oldest queued job of a backend has waited",
            labels=["backend"],
        )
        online = GaugeMetricFamily(
            "ondemand_runners_online",
            "Healthy runners seen recently, per backend",
            labels=["backend"],
        )
        for backend in backends:
            count, since = by_backend.get(backend, (0, None))
            depth.add_metric([backend], count)
            oldest.add_metric([backend], _age(since, now))
            online.add_metric([backend], self.runners.online_count(backend, registered))
        yield depth
        yield oldest
        yield online
        yield GaugeMetricFamily(
            "ondemand_runners_registered",
            "Runners registered",
            value=len(registered),
        )
        yield histogram(
            "ondemand_job_wait_seconds",
            "How long jobs waited in the queue before a runner started them",
            ["backend"],
            (((backend,), seconds) for backend, seconds in waits),
        )
        yield histogram(
            "ondemand_job_duration_seconds",
            "How long finished jobs ran, by backend and final state",
            ["backend", "state"],
            (((backend, state), seconds) for backend, state, seconds in durations),
        )
        outcomes = GaugeMetricFamily(
            "ondemand_deliveries", "Webhook deliveries stored, by outcome", labels=["outcome"]
        )
        for outcome, count in sorted(deliveries.items()):
            outcomes.add_metric([outcome], count)
        yield outcomes
        yield GaugeMetricFamily(
            "ondemand_inbox_oldest_age_seconds",
            "Age of the oldest delivery not yet processed",
            value=_age(inbox[1], now),
        )
        yield GaugeMetricFamily(
            "ondemand_outbox_backlog", "Outbox items not yet delivered to GitHub", value=outbox[0]
        )
        yield GaugeMetricFamily(
            "ondemand_outbox_oldest_age_seconds",
            "Age of the oldest outbox item not yet delivered",
            value=_age(outbox[1], now),
        )


class PrunedCollector(Collector):
    """The rows this process's pruner deleted, by kind (each replica prunes its share)."""

    def __init__(self, totals: Callable[[], Pruned]) -> None:
        self.totals = totals

    def collect(self) -> Iterator[Metric]:
        totals = self.totals()
        family = CounterMetricFamily(
            "ondemand_pruned_rows",
            "Rows retention deleted since this process started, by kind (logs: whole logs)",
            labels=["kind"],
        )
        for kind, name in PRUNED_KINDS:
            family.add_metric([kind], getattr(totals, name))
        yield family


class BudgetCollector(Collector):
    """GitHub's hourly call budget as its last answer to this process stated it, by
    installation's owner (`token` for a token user): below the reserve the outbox leaves out
    what only shows a job on its way (`service/publish/low_budget.py`)."""

    def __init__(self, budgets: Callable[[], Mapping[str, Budget]]) -> None:
        self.budgets = budgets

    def collect(self) -> Iterator[Metric]:
        budgets = self.budgets()
        left = GaugeMetricFamily(
            "ondemand_github_calls_left",
            "Calls of the hour's GitHub budget left, as GitHub's last answer stated",
            labels=["installation"],
        )
        limit = GaugeMetricFamily(
            "ondemand_github_calls_limit", "The hourly GitHub budget", labels=["installation"]
        )
        for owner, budget in budgets.items():
            left.add_metric([owner], budget.remaining)
            limit.add_metric([owner], budget.limit)
        yield left
        yield limit


class Metrics:
    """One app's registry: the database collector, the webhook's own counters (kept by
    `WebhookMetrics`) and, given its totals, what the pruner deleted."""

    def __init__(
        self,
        db: Database,
        runners: RunnerRegistry,
        backends: Iterable[str],
        pruned: Callable[[], Pruned] | None = None,
        budgets: Callable[[], Mapping[str, Budget]] | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(DatabaseCollector(db, runners, backends))
        if pruned is not None:
            self.registry.register(PrunedCollector(pruned))
        if budgets is not None:
            self.registry.register(BudgetCollector(budgets))
        self.webhook_requests = Counter(
            "ondemand_webhook_requests",
            "Webhook requests by the HTTP status they were answered with "
            "(202 accepted, 200 duplicate or ignored, 400 malformed, 401 bad signature, "
            "413 too large, 503 database unavailable)",
            ["code"],
            registry=self.registry,
        )
        self.webhook_seconds = Histogram(
            "ondemand_webhook_latency_seconds",
            "How long the webhook took to answer a delivery",
            buckets=WEBHOOK_BUCKETS,
            registry=self.registry,
        )

    def router(self) -> APIRouter:
        router = APIRouter()

        @router.get("/metrics")
        def metrics() -> Response:
            return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)

        return router


class WebhookMetrics:
    """ASGI middleware counting and timing the webhook's answers (every other request passes
    straight through)."""

    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] != "/webhook" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        code = 500

        async def sending(message: Message) -> None:
            nonlocal code
            if message["type"] == "http.response.start":
                code = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self.metrics.webhook_seconds.observe(time.perf_counter() - started)
            self.metrics.webhook_requests.labels(code=str(code)).inc()
