"""While deliveries crowd in, the background workers leave the webhook room: the recorder says
it is busy when one delivery arrives while another waits, and a worker then rests after each
item (ten times the item's time, at most a quarter second)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from service.db.engine import Database
from service.db.migrate import upgrade
from service.receive.recorder import BUSY_S, DeliveryRecorder
from service.receive.triage import Triage
from service.worker import MAX_REST_S, REST_FACTOR, Worker


def test_the_recorder_is_busy_while_deliveries_crowd_in(tmp_path: Path) -> None:
    db = Database.connect(f"sqlite:///{tmp_path / 'pace.db'}")
    upgrade(db.engine)
    recorder = DeliveryRecorder(db)
    verdict = Triage(False, "ping")
    try:

        async def one(delivery: str) -> bool:
            return await recorder.record(delivery, "ping", {"zen": "z"}, verdict)

        assert asyncio.run(one("alone"))
        assert not recorder.busy()  # one at a time is no crowd

        async def crowd() -> list[bool]:
            return await asyncio.gather(*(one(f"d-{i}") for i in range(20)))

        assert all(asyncio.run(crowd()))
        assert recorder.busy()
        time.sleep(BUSY_S + 0.05)
        assert not recorder.busy()
    finally:
        recorder.stop()
        db.dispose()


def test_a_worker_rests_only_while_the_webhook_is_busy() -> None:
    busy = False
    worker = Worker(threading.Event(), busy=lambda: busy)

    def rest_after(item_s: float) -> tuple[float, float]:
        """(how long the item took, how long the worker rested after it)."""
        with worker.paced():
            start = time.monotonic()
            time.sleep(item_s)  # the item: a loaded host oversleeps, so it is measured
            before = time.monotonic()
        return before - start, time.monotonic() - before

    _, rest = rest_after(0.01)
    assert rest < 0.005
    busy = True
    item, rest = rest_after(0.01)
    expected = min(REST_FACTOR * item, MAX_REST_S)
    assert expected <= rest < expected + 0.1  # ten times the item
    _, rest = rest_after(1.0)
    assert MAX_REST_S <= rest < MAX_REST_S + 0.1  # capped
