"""A database outage, for real: the service reaches PostgreSQL through a proxy the test cuts.
While it is cut every request is answered 503 with `Retry-After` (GitHub shows a failed
delivery to redeliver, not a crash), the outage is logged once when it starts and once when
it ends, with no traceback, and the service recovers without a restart."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy.exc import OperationalError

from service.queue.reaper import LeaseReaper
from tests.service.helpers import live_service, open_queue, service_settings
from tests.service.test_webhook import comment_payload, post
from tests.support.proxy import CuttableProxy


@pytest.mark.postgres
def test_a_database_outage_answers_503_and_is_logged_once(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = CuttableProxy(("127.0.0.1", 5432))
    url = pg_url.replace("@127.0.0.1:5432/", f"@127.0.0.1:{proxy.port}/")
    with live_service(service_settings(url)) as live:
        assert post(live, comment_payload()).status_code == 202
        caplog.set_level(logging.INFO)
        caplog.clear()
        proxy.cut()
        answers = [post(live, comment_payload()) for _ in range(20)]
        assert [a.status_code for a in answers] == [503] * 20
        assert {a.headers["retry-after"] for a in answers} == {"5"}
        assert httpx.get(f"{live.url}/jobs/1").status_code == 503
        time.sleep(2.5)  # the background workers' rounds fail meanwhile, quietly
        proxy.restore()
        time.sleep(1.2)  # past the settle time: the next success ends the outage
        assert post(live, comment_payload()).status_code == 202  # no restart needed
        assert httpx.get(f"{live.url}/jobs/1").status_code in (200, 404)
        messages = [r.getMessage() for r in caplog.records]
        assert len([m for m in messages if m.startswith("database unreachable")]) == 1, messages
        assert len([m for m in messages if m.startswith("database back after")]) == 1, messages
        assert not [r for r in caplog.records if r.exc_info], "no traceback during an outage"
        assert not [
            r
            for r in caplog.records
            if r.levelno >= logging.ERROR and not r.getMessage().startswith("database unreachable")
        ], messages
    proxy.cut()


def test_the_reaper_waits_a_lease_after_start_and_after_the_database_failed(
    tmp_path: Path,
) -> None:
    now = [1000.0]
    with open_queue(f"sqlite:///{tmp_path / 'r.db'}", lease_seconds=30) as queue:
        outages = queue.db.outages
        reaper = LeaseReaper(queue.jobs, threading.Event(), clock=lambda: now[0])
        assert reaper.deaf_for() == 30.0  # just started: runners have not been heard yet
        now[0] += 31
        assert reaper.deaf_for() == 0.0
        outages._clock = lambda: now[0]  # the same clock for the outage record
        outages.failed(OperationalError("SELECT 1", {}, Exception("connection refused")), "t")
        assert reaper.deaf_for() == 30.0  # heartbeats could not be recorded: wait again
        now[0] += 10
        outages.succeeded()
        assert not outages.down and reaper.deaf_for() == 20.0
