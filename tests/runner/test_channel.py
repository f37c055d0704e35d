"""A job's open channel: a cancel the service answers on the long-poll reaches the `cancel`
Event at once, without waiting for a heartbeat; a 404 on it means lost, but not once the job
has ended; a channel that fails leaves the heartbeat to carry the cancel."""

from __future__ import annotations

import threading
import time

from runner.daemon.heartbeat import Heartbeat
from runner.link.client import HeartbeatAnswer, NotHeld, ServiceUnavailable
from workflows.models import JobSpec

SPEC = JobSpec(id=9, repo="o/r", clone_url="/x", pr_number=1, sha="a" * 40, op="add", backend="cpu")
SLOW_BEAT = 3600.0  # no second heartbeat within a test: only the channel can carry news
OK = HeartbeatAnswer(cancel=False, reason=None)


class ChannelClient:
    """Heartbeats always say "go on"; the channel blocks until `answer` is given."""

    def __init__(self) -> None:
        self.answer: HeartbeatAnswer | Exception | None = None
        self.ready = threading.Condition()
        self.polls = 0

    def heartbeat(self, job_id: int) -> HeartbeatAnswer:
        return OK

    def events(self, job_id: int, wait_s: float) -> HeartbeatAnswer:
        assert job_id == SPEC.id and wait_s > 1
        with self.ready:
            self.polls += 1
            self.ready.notify_all()
            self.ready.wait_for(lambda: self.answer is not None, timeout=wait_s)
            answer = self.answer
        if answer is None:
            return OK
        if isinstance(answer, Exception):
            raise answer
        return answer

    def say(self, answer: HeartbeatAnswer | Exception) -> None:
        with self.ready:
            self.answer = answer
            self.ready.notify_all()

    def wait_polling(self) -> None:
        with self.ready:
            assert self.ready.wait_for(lambda: self.polls > 0, timeout=10)


def test_a_cancel_on_the_channel_stops_the_job_at_once() -> None:
    client = ChannelClient()
    cancel = threading.Event()
    with Heartbeat(client, SPEC, cancel, interval_s=SLOW_BEAT) as beat:
        client.wait_polling()
        said = time.monotonic()
        client.say(HeartbeatAnswer(True, "cancelled by @maintainer"))
        assert cancel.wait(5)
        heard = time.monotonic() - said
    assert heard < 5.0, heard  # the heartbeat, the only other way, is an hour away
    assert beat.reason == "cancelled by @maintainer" and not beat.lost


def test_a_404_on_the_channel_means_lost() -> None:
    client = ChannelClient()
    cancel = threading.Event()
    with Heartbeat(client, SPEC, cancel, interval_s=SLOW_BEAT) as beat:
        client.wait_polling()
        client.say(NotHeld("gone"))
        assert cancel.wait(5)
    assert beat.lost


def test_after_the_job_ended_the_channel_changes_nothing() -> None:
    client = ChannelClient()
    cancel = threading.Event()
    with Heartbeat(client, SPEC, cancel, interval_s=SLOW_BEAT) as beat:
        client.wait_polling()
    # The job completed: the service forgets it, and the open poll's 404 is no loss.
    client.say(NotHeld("completed"))
    time.sleep(0.2)
    assert not beat.lost and not cancel.is_set()


def test_a_failing_channel_retries_and_the_heartbeat_still_cancels() -> None:
    class Flaky(ChannelClient):
        beats = 0

        def heartbeat(self, job_id: int) -> HeartbeatAnswer:
            self.beats += 1
            return OK if self.beats < 3 else HeartbeatAnswer(True, "by heartbeat")

        def events(self, job_id: int, wait_s: float) -> HeartbeatAnswer:
            self.polls += 1
            raise ServiceUnavailable("channel down")

    client = Flaky()
    cancel = threading.Event()
    with Heartbeat(client, SPEC, cancel, interval_s=0.05) as beat:
        assert cancel.wait(10)
    assert beat.reason == "by heartbeat" and client.polls >= 1
