"""A job's open channel (`POST /api/v1/jobs/{id}/events`) on SQLite and PostgreSQL: held
open while nothing happens, answered the moment the job is cancelled or superseded (with why),
at once when it already was; 404 for a job the runner does not hold. On PostgreSQL a cancel
made by another replica reaches the channel through LISTEN/NOTIFY."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from service.settings import Settings
from tests.service.helpers import LiveService, live_service, new_job, service_settings


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _claimed(svc: LiveService, sha: str = "a" * 40) -> tuple[int, str]:
    job, _ = svc.service.jobs.create_job(new_job("add", "cpu", sha=sha))
    _, token = svc.register("cpu-1", ["cpu"])
    claim = httpx.post(
        f"{svc.url}/api/v1/jobs/claim", json={"wait_s": 5}, headers=auth(token), timeout=30
    )
    assert claim.json()["id"] == job.id
    return job.id, token


def _listen(url: str, token: str, wait_s: float) -> tuple[dict[str, Any], list[float]]:
    """Start a long-poll in a thread; its answer and its duration land in the returned boxes."""
    answer: dict[str, Any] = {}
    took: list[float] = []

    def run() -> None:
        started = time.monotonic()
        reply = httpx.post(url, json={"wait_s": wait_s}, headers=auth(token), timeout=wait_s + 10)
        took.append(time.monotonic() - started)
        answer.update(reply.json(), status=reply.status_code)

    threading.Thread(target=run, daemon=True).start()
    return answer, took


def _wait(took: list[float], timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not took:
        assert time.monotonic() < deadline, "the channel never answered"
        time.sleep(0.01)


def test_the_channel_answers_a_cancel_at_once(db_url: str) -> None:
    with live_service(service_settings(db_url)) as svc:
        job_id, token = _claimed(svc)
        url = f"{svc.url}/api/v1/jobs/{job_id}/events"
        quiet = httpx.post(url, json={"wait_s": 0.3}, headers=auth(token))
        assert quiet.json() == {"cancel": False, "reason": None}

        answer, took = _listen(url, token, wait_s=20)
        time.sleep(0.5)  # the poll is open
        assert not took
        cancelled_at = time.monotonic()
        svc.service.jobs.cancel("octo/kernels", 1, "cancelled by @maintainer")
        _wait(took)
        heard = time.monotonic() - cancelled_at
        assert heard < 5.0, heard  # not the 20 s the poll would have waited
        assert answer == {"cancel": True, "reason": "cancelled by @maintainer", "status": 200}
        # Asked again, it answers at once.
        again = httpx.post(url, json={"wait_s": 20}, headers=auth(token), timeout=5)
        assert again.json()["cancel"] is True

        _, other = svc.register("cpu-2", ["cpu"])
        assert httpx.post(url, json={"wait_s": 0}, headers=auth(other)).status_code == 404


def test_a_supersede_reaches_the_channel(db_url: str) -> None:
    with live_service(service_settings(db_url)) as svc:
        job_id, token = _claimed(svc)
        answer, took = _listen(f"{svc.url}/api/v1/jobs/{job_id}/events", token, wait_s=20)
        time.sleep(0.3)
        svc.service.jobs.supersede("octo/kernels", 1, "b" * 40)
        _wait(took, timeout=5)
        assert answer["cancel"] is True and answer["reason"] == "superseded by bbbbbbb"


def test_a_cancel_on_another_replica_reaches_the_channel(pg_url: str) -> None:
    settings: Settings = service_settings(pg_url)
    with live_service(settings) as first, live_service(settings) as second:
        job_id, token = _claimed(first)
        answer, took = _listen(f"{first.url}/api/v1/jobs/{job_id}/events", token, wait_s=20)
        time.sleep(0.5)
        cancelled_at = time.monotonic()
        second.service.jobs.cancel("octo/kernels", 1, "cancelled by @elsewhere")
        _wait(took)
        assert time.monotonic() - cancelled_at < 5.0  # not the poll's 20 s
        assert answer["reason"] == "cancelled by @elsewhere"


def test_a_completed_job_closes_its_channel(db_url: str) -> None:
    with live_service(service_settings(db_url)) as svc:
        job_id, token = _claimed(svc)
        answer, took = _listen(f"{svc.url}/api/v1/jobs/{job_id}/events", token, wait_s=20)
        time.sleep(0.3)
        done = {"status": "succeeded", "sha": "a" * 40}
        completed = httpx.post(
            f"{svc.url}/api/v1/jobs/{job_id}/complete", json=done, headers=auth(token)
        )
        assert completed.status_code == 200
        _wait(took, timeout=5)
        assert took[0] < 5  # not held open for the rest of its 20 s
        assert answer["reason"] == "job is succeeded"
