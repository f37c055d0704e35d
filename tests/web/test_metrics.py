"""`/metrics` in Prometheus' text format, read from the database at scrape time (SQLite and
PostgreSQL): jobs, queue depth and wait, durations, deliveries, the outbox, runners; the
webhook's answers and latency counted per app, two apps in one process apart."""

from __future__ import annotations

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.service.helpers import live_service, service_settings
from tests.web.support import finish_job, new_job, result, run_job


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    answer = httpx.get(f"{url}/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def test_metrics_from_the_database_and_the_webhook(db_url: str) -> None:
    settings = service_settings(db_url, process_workers=False)
    with live_service(settings) as live, live_service(settings) as twin:
        runner = live.register("runner-one", ["cpu"])
        done, _ = live.service.jobs.create_job(new_job(sha="1" * 40))
        run_job(live, runner, done.id)
        finish_job(live, runner, done.id, result("1" * 40))
        for op in ("add", "mul"):
            live.service.jobs.create_job(new_job(op=op, sha="2" * 40))
        live.service.jobs.create_job(new_job(backend="nvidia"))
        for _ in range(3):
            assert httpx.post(f"{live.url}/webhook", content=b"{}").status_code == 401

        got = scrape(live.url)
        assert got[("ondemand_queue_depth", (("backend", "cpu"),))] == 2
        assert got[("ondemand_queue_depth", (("backend", "nvidia"),))] == 1
        assert got[("ondemand_queue_depth", (("backend", "mthreads"),))] == 0
        assert got[("ondemand_queue_oldest_wait_seconds", (("backend", "cpu"),))] > 0
        assert got[("ondemand_jobs", (("state", "failed"),))] == 1
        assert got[("ondemand_jobs", (("state", "queued"),))] == 3
        labels = (("backend", "cpu"), ("le", "+Inf"), ("state", "failed"))
        assert got[("ondemand_job_duration_seconds_bucket", labels)] == 1
        assert got[("ondemand_job_duration_seconds_count", labels[:1] + labels[2:])] == 1
        assert got[("ondemand_job_wait_seconds_count", (("backend", "cpu"),))] == 1
        assert got[("ondemand_runners_online", (("backend", "cpu"),))] == 1
        assert got[("ondemand_runners_online", (("backend", "nvidia"),))] == 0
        assert got[("ondemand_runners_registered", ())] == 1
        # Each queued job and the finished one have a comment and a status waiting to go out
        # (no outbox worker runs here).
        assert got[("ondemand_outbox_backlog", ())] >= 4
        assert got[("ondemand_outbox_oldest_age_seconds", ())] > 0
        assert got[("ondemand_deliveries", (("outcome", "pending"),))] == 0
        assert got[("ondemand_webhook_requests_total", (("code", "401"),))] == 3
        assert got[("ondemand_webhook_latency_seconds_count", ())] == 3

        other = scrape(twin.url)  # the same database, another app: its own webhook counters
        assert other[("ondemand_queue_depth", (("backend", "cpu"),))] == 2
        assert ("ondemand_webhook_requests_total", (("code", "401"),)) not in other
