"""A database outage, for real: the service reaches PostgreSQL through a proxy the test cuts.
While it is cut every request is answered 503 with `Retry-After` (GitHub shows a failed
delivery to redeliver, not a crash) but liveness, the outage is logged once when it starts and
once when it ends, with no traceback, and the service recovers without a restart. A deadlock
is no outage."""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

import httpx
import pytest
from sqlalchemy.exc import DBAPIError, OperationalError

from service.db.engine import Database
from service.db.outage import Outages, is_conflict, is_outage, is_transient
from service.queue.reaper import LeaseReaper
from service.worker import Worker
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
        # Liveness reads no database: a balancer keeps every replica, each answers 503 itself.
        alive = httpx.get(f"{live.url}/healthz")
        assert alive.status_code == 200 and alive.json()["database_state"] == "unreachable"
        assert httpx.get(f"{live.url}/readyz").status_code == 503
        time.sleep(2.5)  # the background workers' rounds fail meanwhile, quietly
        proxy.restore()
        time.sleep(1.2)  # past the settle time: the next success ends the outage
        assert post(live, comment_payload()).status_code == 202  # no restart needed
        assert httpx.get(f"{live.url}/jobs/1").status_code in (200, 404)
        assert httpx.get(f"{live.url}/readyz").status_code == 200
        assert httpx.get(f"{live.url}/healthz").json()["database_state"] == "ok"
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


def _deadlock(db: Database) -> DBAPIError:
    """A real deadlock: two transactions lock two rows in opposite orders; PostgreSQL aborts
    one of them. Returns the error the loser saw, as SQLAlchemy raises it."""
    with db.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE pair (id int PRIMARY KEY)")
        conn.exec_driver_sql("INSERT INTO pair VALUES (1), (2)")
    both_hold = threading.Barrier(2, timeout=10)
    errors: list[DBAPIError] = []

    def lock(first: int, second: int) -> None:
        try:
            with db.engine.begin() as conn:
                conn.exec_driver_sql(f"SELECT * FROM pair WHERE id = {first} FOR UPDATE")
                both_hold.wait()
                conn.exec_driver_sql(f"SELECT * FROM pair WHERE id = {second} FOR UPDATE")
        except DBAPIError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=lock, args=p) for p in ((1, 2), (2, 1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(errors) == 1, errors
    return errors[0]


@pytest.mark.postgres
def test_a_deadlock_is_a_conflict_tried_again_not_an_outage(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    db = Database.connect(pg_url)
    try:
        lost = _deadlock(db)
    finally:
        db.dispose()
    assert is_conflict(lost) and is_transient(lost)
    assert not is_outage(lost), "a deadlock is the database working, not down"

    outages = Outages()
    rounds: list[float] = []
    done = threading.Event()

    class Claims(Worker):
        name = "claims"

        def run_once(self) -> float | None:
            rounds.append(time.monotonic())
            if len(rounds) == 1:
                raise lost
            done.set()
            return None

    caplog.set_level(logging.INFO)
    stopping = threading.Event()
    worker = Claims(stopping, outages)
    worker.start()
    assert done.wait(5)
    stopping.set()
    worker.join()
    assert rounds[1] - rounds[0] < 0.5, "a lost conflict is tried again at once, not after 1 s"
    assert not outages.down and outages.last_failure is None
    messages = [r.getMessage() for r in caplog.records]
    assert not [m for m in messages if "database unreachable" in m], messages
    assert not [r for r in caplog.records if r.exc_info], "no traceback for a lost conflict"
    assert [m for m in messages if "lost a conflict" in m and "deadlock" in m], messages
