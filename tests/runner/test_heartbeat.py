"""A job's heartbeat: cancel from the service (with its reason), a lost job, outages ridden
out, and a thread that ends with the block."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from runner.daemon.heartbeat import Heartbeat
from runner.link.client import HeartbeatAnswer, NotHeld, ServiceUnavailable
from workflows.models import JobSpec

SPEC = JobSpec(id=5, repo="o/r", clone_url="/x", pr_number=1, sha="a" * 40, op="add", backend="cpu")
FAST = 0.01


class FakeClient:
    """Answers heartbeats from a script (its last entry repeats); an exception is raised."""

    def __init__(self, *script: HeartbeatAnswer | Exception) -> None:
        self.script = list(script)
        self.calls = 0
        self.called = threading.Event()

    def heartbeat(self, job_id: int) -> HeartbeatAnswer:
        assert job_id == SPEC.id
        self.calls += 1
        self.called.set()
        answer = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def events(self, job_id: int, wait_s: float) -> HeartbeatAnswer:
        """No open channel here (these tests are of the heartbeat's own answers)."""
        time.sleep(FAST)
        raise ServiceUnavailable("no channel")


def _until(condition: Callable[[], bool], timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline
        time.sleep(0.005)


OK = HeartbeatAnswer(cancel=False, reason=None)


def test_cancel_from_the_service_sets_the_event_and_the_reason() -> None:
    client = FakeClient(OK, ServiceUnavailable("down"), OK, HeartbeatAnswer(True, "by @me"))
    cancel = threading.Event()
    with Heartbeat(client, SPEC, cancel, interval_s=FAST) as beat:
        assert cancel.wait(10)  # an outage in between does not stop it
    assert beat.reason == "by @me" and not beat.lost
    assert client.calls >= 4


def test_cancel_without_a_reason() -> None:
    cancel = threading.Event()
    with Heartbeat(FakeClient(HeartbeatAnswer(True, None)), SPEC, cancel, FAST) as beat:
        assert cancel.wait(10)
    assert beat.reason == "cancelled"


def test_a_job_that_is_not_ours_any_more_is_lost_and_cancelled() -> None:
    client = FakeClient(OK, NotHeld("404"))
    cancel = threading.Event()
    with Heartbeat(client, SPEC, cancel, interval_s=FAST) as beat:
        assert cancel.wait(10)
        _until(lambda: not beat._thread.is_alive())  # it stops beating
    assert beat.lost and beat.reason is None
    assert client.calls == 2


def test_an_earlier_cancel_keeps_no_service_reason() -> None:
    # The daemon's second signal cancelled first: the job is "runner stopping", not the service's.
    cancel = threading.Event()
    cancel.set()
    client = FakeClient(HeartbeatAnswer(True, "by @me"))
    with Heartbeat(client, SPEC, cancel, interval_s=FAST) as beat:
        _until(lambda: client.calls >= 2)
    assert beat.reason is None and not beat.lost


def test_the_block_ends_the_thread_and_the_interval_follows_the_lease() -> None:
    client = FakeClient(OK)
    with Heartbeat(client, SPEC, threading.Event(), interval_s=FAST) as beat:
        assert client.called.wait(10)
    assert not beat._thread.is_alive()
    calls = client.calls
    time.sleep(5 * FAST)
    assert client.calls == calls
    assert Heartbeat(client, SPEC, threading.Event()).interval_s == 40
    short = SPEC.model_copy(update={"lease_seconds": 0})
    assert Heartbeat(client, short, threading.Event()).interval_s == 0.2
