"""The runner API over HTTP against the real service under uvicorn (docs/runner-protocol.md)."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from sqlalchemy import select
from sqlalchemy.engine import make_url

from service.db.engine import utcnow
from service.db.models import Runner
from service.queue.operators import OperatorCatalog
from service.queue.reaper import LeaseReaper
from tests.service.helpers import LiveService, live_service, new_job, service_settings
from workflows.models import JobResult, JobStatus


@pytest.fixture
def svc(db_url: str) -> Iterator[LiveService]:
    with live_service(service_settings(db_url, lease_seconds=30)) as live:
        yield live


@pytest.fixture
def sqlite_svc(tmp_path: Path) -> Iterator[LiveService]:
    url = f"sqlite:///{tmp_path / 'svc.db'}"
    # Short enough to lapse within the tests, long enough for a loaded CI host to send a
    # heartbeat after its claim (a 1 s lease lapsed between the two there once).
    with live_service(service_settings(url, lease_seconds=3)) as live:
        yield live


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def result(status: str = "succeeded") -> dict[str, object]:
    return JobResult(status=JobStatus(status), sha="a" * 40).model_dump(mode="json")


def test_register_checks_token_and_backends(svc: LiveService) -> None:
    url = f"{svc.url}/api/v1/runners/register"
    bad = httpx.post(url, json={"registration_token": "nope", "name": "r", "backends": ["cpu"]})
    assert bad.status_code == 401
    unknown = httpx.post(
        url, json={"registration_token": "reg-token", "name": "r", "backends": ["tpu"]}
    )
    assert unknown.status_code == 422 and "tpu" in unknown.text
    alias = httpx.post(
        url, json={"registration_token": "reg-token", "name": "r", "backends": ["musa"]}
    )
    assert alias.status_code == 201
    runner = svc.service.runners.authenticate(alias.json()["token"])
    assert runner is not None and runner.backends == ["mthreads"]
    assert runner.token_hash != alias.json()["token"]  # stored hashed


def test_calls_need_a_runner_token(svc: LiveService) -> None:
    for path in ("/api/v1/jobs/claim", "/api/v1/jobs/1/heartbeat", "/api/v1/runners/health"):
        assert httpx.post(f"{svc.url}{path}", json={}).status_code == 401
        wrong = httpx.post(f"{svc.url}{path}", json={}, headers=auth("forged"))
        assert wrong.status_code == 401


def test_claim_answers_204_then_the_job(svc: LiveService) -> None:
    _, token = svc.register()
    empty = httpx.post(f"{svc.url}/api/v1/jobs/claim", json={"wait_s": 0}, headers=auth(token))
    assert empty.status_code == 204
    job, _ = svc.service.jobs.create_job(new_job("add", "cpu"))
    got = httpx.post(f"{svc.url}/api/v1/jobs/claim", json={"wait_s": 0}, headers=auth(token))
    assert got.status_code == 200
    spec = got.json()
    assert spec["id"] == job.id and spec["op"] == "add" and spec["sha"] == "a" * 40
    assert spec["lease_seconds"] == 30 and spec["attempt"] == 1
    assert spec["options"] == {
        "bench": True,
        "compare": True,
        "exact_base": False,
        "profile": False,
    }


def test_long_poll_wakes_at_once(svc: LiveService) -> None:
    _, token = svc.register()
    answers: list[tuple[int, float]] = []

    def claim() -> None:
        r = httpx.post(
            f"{svc.url}/api/v1/jobs/claim", json={"wait_s": 20}, headers=auth(token), timeout=30
        )
        answers.append((r.status_code, time.monotonic()))

    thread = threading.Thread(target=claim)
    thread.start()
    time.sleep(0.5)  # the claim is now waiting
    assert not answers
    start = time.monotonic()
    svc.service.jobs.create_job(new_job("mul", "cpu"))
    thread.join(timeout=10)
    assert answers and answers[0][0] == 200
    assert answers[0][1] - start < 3  # answered when the job came, not at its 20 s wait


def test_heartbeat_logs_complete_and_isolation(svc: LiveService) -> None:
    _, token = svc.register("mine")
    _, other = svc.register("other")
    job, _ = svc.service.jobs.create_job(new_job())
    api = f"{svc.url}/api/v1/jobs"
    assert httpx.post(f"{api}/claim", json={}, headers=auth(token)).status_code == 200
    beat = httpx.post(f"{api}/{job.id}/heartbeat", json={}, headers=auth(token))
    assert beat.status_code == 200 and beat.json()["cancel"] is False
    for path, body in (("heartbeat", {}), ("logs", {"offset": 0, "data": "x"})):
        assert (
            httpx.post(f"{api}/{job.id}/{path}", json=body, headers=auth(other)).status_code == 404
        )
    assert (
        httpx.post(f"{api}/{job.id}/complete", json=result(), headers=auth(other)).status_code
        == 404
    )
    assert httpx.post(f"{api}/999/heartbeat", json={}, headers=auth(token)).status_code == 404

    first = httpx.post(
        f"{api}/{job.id}/logs", json={"offset": 0, "data": "step 1 ✓\n"}, headers=auth(token)
    )
    end = len("step 1 ✓\n".encode())
    assert first.status_code == 200 and first.json() == {"offset": end}
    dup = httpx.post(
        f"{api}/{job.id}/logs", json={"offset": 0, "data": "step 1 ✓\n"}, headers=auth(token)
    )
    assert dup.status_code == 200 and dup.json() == {"offset": end}
    gap = httpx.post(
        f"{api}/{job.id}/logs", json={"offset": end + 10, "data": "x"}, headers=auth(token)
    )
    assert gap.status_code == 409 and gap.json() == {"offset": end}
    more = httpx.post(
        f"{api}/{job.id}/logs", json={"offset": end, "data": "done\n"}, headers=auth(token)
    )
    assert more.status_code == 200
    assert httpx.get(f"{svc.url}/jobs/{job.id}/log").text == "step 1 ✓\ndone\n"

    done = httpx.post(f"{api}/{job.id}/complete", json=result("failed"), headers=auth(token))
    assert done.status_code == 200 and done.json() == {"status": "failed"}
    again = httpx.post(f"{api}/{job.id}/complete", json=result("succeeded"), headers=auth(token))
    assert again.status_code == 200 and again.json() == {"status": "failed"}
    assert svc.service.jobs.get_job(job.id).status == JobStatus.failed
    page = httpx.get(f"{svc.url}/jobs/{job.id}")
    assert page.status_code == 200 and "failed" in page.text and f"/jobs/{job.id}/log" in page.text


def test_a_result_from_a_newer_runner_lands_and_a_malformed_one_is_refused(
    svc: LiveService, caplog: pytest.LogCaptureFixture
) -> None:
    """Runners are upgraded before the service: fields of a result the service does not know,
    at any depth, are left out and logged, and the result is the job's; a result that is
    wrong in what the service does know is refused with where and why, and the job keeps
    waiting for one."""
    _, token = svc.register("newer")
    job, _ = svc.service.jobs.create_job(new_job())
    api = f"{svc.url}/api/v1/jobs"
    assert httpx.post(f"{api}/claim", json={}, headers=auth(token)).status_code == 200
    bad = {**result(), "status": "splendid"}
    refused = httpx.post(f"{api}/{job.id}/complete", json=bad, headers=auth(token))
    assert refused.status_code == 422 and "status" in refused.text
    assert svc.service.jobs.get_job(job.id).status == JobStatus.running
    for body, code in (({"step": "accuracy", "eta_s": 40}, 204), ({"step": 3}, 422)):
        said = httpx.post(f"{api}/{job.id}/progress", json=body, headers=auth(token))
        assert said.status_code == code, said.text  # a newer runner's progress is still shown
    newer = {**result("failed"), "energy_j": 12.5}
    newer["accuracy"] = {"passed": 3, "failed": 1, "flaky": 2}
    with caplog.at_level(logging.WARNING, logger="service.web.runner_api"):
        done = httpx.post(f"{api}/{job.id}/complete", json=newer, headers=auth(token))
    assert done.status_code == 200 and done.json() == {"status": "failed"}, done.text
    assert "left out: accuracy.flaky, energy_j" in caplog.text
    stored = svc.service.jobs.get_job(job.id)
    assert stored.status == JobStatus.failed and stored.result is not None
    assert stored.result["accuracy"]["failed"] == 1 and "flaky" not in stored.result["accuracy"]


def test_health_counts_only_healthy_runners(svc: LiveService) -> None:
    _, token = svc.register("gpu-1", ["mthreads"])
    assert svc.service.runners.online_count("mthreads") == 1
    sick = httpx.post(
        f"{svc.url}/api/v1/runners/health",
        json={"healthy": False, "reason": "no MUSA device"},
        headers=auth(token),
    )
    assert sick.status_code == 204
    assert svc.service.runners.online_count("mthreads") == 0
    assert "sick: no MUSA device" in httpx.get(f"{svc.url}/").text


def test_lapsed_lease_requeues_then_runner_lost(sqlite_svc: LiveService) -> None:
    svc = sqlite_svc
    _, t1 = svc.register("lost-1")
    _, t2 = svc.register("lost-2")
    job, _ = svc.service.jobs.create_job(new_job())
    api = f"{svc.url}/api/v1/jobs"
    assert httpx.post(f"{api}/claim", json={}, headers=auth(t1)).json()["attempt"] == 1
    assert httpx.post(f"{api}/{job.id}/heartbeat", json={}, headers=auth(t1)).status_code == 200
    second = httpx.post(f"{api}/claim", json={"wait_s": 10}, headers=auth(t2), timeout=15)
    assert second.status_code == 200 and second.json()["attempt"] == 2
    assert httpx.post(f"{api}/{job.id}/heartbeat", json={}, headers=auth(t1)).status_code == 404
    assert httpx.post(f"{api}/{job.id}/heartbeat", json={}, headers=auth(t2)).status_code == 200
    deadline = time.monotonic() + 15
    while svc.service.jobs.get_job(job.id).status == JobStatus.running:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    lost = svc.service.jobs.get_job(job.id)
    assert lost.status == JobStatus.errored and lost.reason == "runner lost"


def test_concurrent_http_claims_take_each_job_once(svc: LiveService) -> None:
    jobs = {svc.service.jobs.create_job(new_job(f"op{i}"))[0].id for i in range(24)}
    tokens = [svc.register(f"r{i}")[1] for i in range(6)]
    taken: list[int] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(tokens))

    def work(token: str) -> None:
        with httpx.Client(headers=auth(token), timeout=30) as client:
            barrier.wait()
            while (r := client.post(f"{svc.url}/api/v1/jobs/claim", json={})).status_code == 200:
                with lock:
                    taken.append(r.json()["id"])

    threads = [threading.Thread(target=work, args=(t,)) for t in tokens]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert sorted(taken) == sorted(jobs)


def test_pages(svc: LiveService) -> None:
    job, _ = svc.service.jobs.create_job(new_job("add", "cpu"))
    page = httpx.get(f"{svc.url}/jobs/{job.id}")
    assert page.status_code == 200 and "queued" in page.text and "add" in page.text
    assert "ondemand:add:cpu" not in page.text  # the report's hidden marker never shows
    assert httpx.get(f"{svc.url}/jobs/{job.id + 100}").status_code == 404
    assert httpx.get(f"{svc.url}/jobs/{job.id + 100}/log").status_code == 404
    assert httpx.get(f"{svc.url}/jobs/{job.id}/log").text == ""
    assert f"/jobs/{job.id}" in httpx.get(f"{svc.url}/").text
    assert httpx.get(f"{svc.url}/healthz").json()["status"] == "ok"


def test_private_repositories_pages_need_the_links_key(svc: LiveService) -> None:
    public, _ = svc.service.jobs.create_job(new_job("add", "cpu"))
    private, _ = svc.service.jobs.create_job(
        dataclasses.replace(new_job("secret_op", "cpu", pr=2), repo="octo/private", private=True)
    )
    links = svc.service.links
    # the public job's links carry no key and open for anyone
    assert links.job(public.id, False) == f"http://ondemand.test/jobs/{public.id}"
    assert httpx.get(f"{svc.url}/jobs/{public.id}").status_code == 200
    # the private job's pages answer 404 without the key, as for a job that does not exist
    for path in (f"/jobs/{private.id}", f"/jobs/{private.id}/log"):
        assert httpx.get(f"{svc.url}{path}").status_code == 404
        assert httpx.get(f"{svc.url}{path}?key={'0' * 32}").status_code == 404
        key = links.key(private.id)
        opened = httpx.get(f"{svc.url}{path}?key={key}")
        assert opened.status_code == 200
        assert opened.headers["referrer-policy"] == "no-referrer"  # the key stays on the page
    assert links.job(private.id, True).endswith(f"/jobs/{private.id}?key={links.key(private.id)}")
    # the dashboard does not list it; every page says nosniff and carries a policy
    board = httpx.get(f"{svc.url}/")
    assert "secret_op" not in board.text and "octo/private" not in board.text
    assert board.headers["x-content-type-options"] == "nosniff"
    assert "default-src 'none'" in board.headers["content-security-policy"]


def test_a_stopping_runner_gives_an_unstarted_claim_back(svc: LiveService) -> None:
    _, token = svc.register("stopping")
    job, _ = svc.service.jobs.create_job(new_job())
    api = f"{svc.url}/api/v1/jobs"
    spec = httpx.post(f"{api}/claim", json={}, headers=auth(token)).json()
    given = httpx.post(f"{api}/{spec['id']}/release", json={}, headers=auth(token))
    assert given.status_code == 204
    back = svc.service.jobs.get_job(job.id)
    assert back.status == JobStatus.queued and back.attempt == 1
    again = httpx.post(f"{api}/claim", json={}, headers=auth(token)).json()
    assert httpx.post(f"{api}/{again['id']}/heartbeat", json={}, headers=auth(token)).is_success
    assert httpx.post(f"{api}/{job.id}/release", json={}, headers=auth(token)).status_code == 409


def test_a_runner_deregisters_once_it_holds_no_job(svc: LiveService) -> None:
    """An ephemeral runner leaves after its job: refused while it holds one, then its token
    stops working and it is no longer listed, while its job keeps its name."""
    _, token = svc.register("ephemeral-7", ["cpu"])
    job, _ = svc.service.jobs.create_job(new_job("add", "cpu"))
    claim = httpx.post(f"{svc.url}/api/v1/jobs/claim", json={"wait_s": 0}, headers=auth(token))
    assert claim.status_code == 200
    leave = f"{svc.url}/api/v1/runners/deregister"
    held = httpx.post(leave, json={}, headers=auth(token))
    assert held.status_code == 409 and "report it or hand it back" in held.text
    done = httpx.post(
        f"{svc.url}/api/v1/jobs/{job.id}/complete", json=result(), headers=auth(token)
    )
    assert done.status_code == 200
    assert svc.service.runners.online_count("cpu") == 1
    assert "ephemeral-7" in runners_listed(svc)
    assert httpx.post(leave, json={}, headers=auth(token)).status_code == 204
    assert svc.service.runners.online_count("cpu") == 0
    again = httpx.post(f"{svc.url}/api/v1/jobs/claim", json={"wait_s": 0}, headers=auth(token))
    assert again.status_code == 401
    assert "ephemeral-7" not in runners_listed(svc)
    finished = svc.service.jobs.get_job(job.id)
    assert finished is not None and finished.runner_name == "ephemeral-7"


def runners_listed(svc: LiveService) -> str:
    """The dashboard's runners section."""
    page = httpx.get(f"{svc.url}/").text
    return page.split("<h2>Runners</h2>", 1)[1].split("<h2>", 1)[0]


def test_runners_unseen_for_long_are_removed_unless_they_hold_a_job(svc: LiveService) -> None:
    """As GitHub does with self-hosted runners gone for two weeks: the reaper removes a runner
    unseen past `runner_forget_days` (a machine gone, an ephemeral runner killed before it could
    deregister), never one holding a running job; a removed one that comes back is refused
    and registers again."""
    _, idle = svc.register("gone-idle", ["cpu"])
    _, busy = svc.register("gone-busy", ["cpu"])
    svc.service.jobs.create_job(new_job("add", "cpu"))
    claim = httpx.post(f"{svc.url}/api/v1/jobs/claim", json={"wait_s": 0}, headers=auth(busy))
    assert claim.status_code == 200
    _, fresh = svc.register("seen-today", ["cpu"])
    registry = svc.service.runners
    stale = utcnow() - timedelta(days=15)
    with svc.service.db.writes() as session, session.begin():
        for runner in session.scalars(select(Runner)):
            if runner.name.startswith("gone-"):
                runner.last_seen_at = stale
    clock = [0.0]
    reaper = LeaseReaper(
        svc.service.jobs, threading.Event(), clock=lambda: clock[0], runners=registry,
        forget_days=14,
    )
    clock[0] = 10_000.0  # past the reaper's start-up grace
    reaper.run_once()
    assert sorted(r.name for r in registry.all()) == ["gone-busy", "seen-today"]
    refused = httpx.post(f"{svc.url}/api/v1/jobs/claim", json={"wait_s": 0}, headers=auth(idle))
    assert refused.status_code == 401
    for token in (busy, fresh):
        assert registry.authenticate(token) is not None
    assert registry.forget_unseen(14) == []  # looked at once a minute; nothing new anyway


class _Meeting:
    """A queue listener that holds each claim, its own job's comment and check rows locked,
    until the other claim has got as far: the moment two replicas' claims overlap."""

    def __init__(self, inner: Any, barrier: threading.Barrier) -> None:
        self.inner = inner
        self.barrier = barrier

    def job_changed(self, session: Any, job: Any) -> None:
        self.inner.job_changed(session, job)
        if job.status == JobStatus.running:
            self.barrier.wait(timeout=10)

    def queue_moved(self, session: Any, jobs: Any) -> None:
        self.inner.queue_moved(session, jobs)

    def job_progressed(self, session: Any, job: Any) -> None:
        self.inner.job_progressed(session, job)


def test_two_replicas_claiming_at_once_do_not_deadlock(pg_url: str) -> None:
    """Two replicas' claims at the same moment: each changes its job's comment and check, then
    refreshes the comments of the jobs still queued behind it (their positions moved), and in
    its view the other's job is one of them. Neither may wait for the other's rows: PostgreSQL
    would end one with "deadlock detected", a 503 to its runner and a database outage in the
    log, for a database that never went away."""
    settings = service_settings(pg_url, lease_seconds=30)
    with live_service(settings) as first, live_service(settings) as second:
        barrier = threading.Barrier(2)
        for live in (first, second):
            live.service.jobs.listener = _Meeting(live.service.jobs.listener, barrier)
        for op in ("add", "mul", "sub"):
            first.service.jobs.create_job(new_job(op, "cpu"))
        tokens = [first.register(f"r{i}", ["cpu"])[1] for i in range(2)]
        answers: dict[int, httpx.Response] = {}

        def claim(i: int, live: LiveService) -> None:
            answers[i] = httpx.post(
                f"{live.url}/api/v1/jobs/claim", json={"wait_s": 0}, headers=auth(tokens[i]),
                timeout=30,
            )  # fmt: skip

        threads = [threading.Thread(target=claim, args=(i, live))
                   for i, live in enumerate((first, second))]  # fmt: skip
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert [answers[i].status_code for i in (0, 1)] == [200, 200], answers[0].text
        assert {answers[i].json()["op"] for i in (0, 1)} == {"add", "mul"}
        assert not first.service.db.outages.down and not second.service.db.outages.down


class _Held:
    """A queue listener that keeps the transaction of a verdict open until `release`."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.entered = threading.Event()
        self.release = threading.Event()

    def job_changed(self, session: Any, job: Any) -> None:
        self.inner.job_changed(session, job)
        if job.status == JobStatus.succeeded:
            self.entered.set()
            self.release.wait(timeout=20)

    def queue_moved(self, session: Any, jobs: Any) -> None:
        self.inner.queue_moved(session, jobs)

    def job_progressed(self, session: Any, job: Any) -> None:
        self.inner.job_progressed(session, job)


def test_two_verdicts_on_one_commit_at_once_both_keep_its_operators(pg_url: str) -> None:
    """Two jobs of one commit completed at the same moment on two replicas: both find the
    commit's operators unknown and record them; the second must update what the first wrote,
    not fail the runner's report with a 500 (a duplicate key) and a traceback."""
    settings = service_settings(pg_url, lease_seconds=30)
    with live_service(settings) as first, live_service(settings) as second:
        held = _Held(first.service.jobs.listener)
        first.service.jobs.listener = held
        jobs = [first.service.jobs.create_job(new_job(op, "cpu"))[0].id for op in ("add", "mul")]
        tokens = [first.register(f"r{i}", ["cpu"])[1] for i in range(2)]
        for token in tokens:
            claim = httpx.post(f"{first.url}/api/v1/jobs/claim", json={"wait_s": 0},
                               headers=auth(token))  # fmt: skip
            assert claim.status_code == 200
            httpx.post(f"{first.url}/api/v1/jobs/{claim.json()['id']}/heartbeat",
                       headers=auth(token))  # fmt: skip
        done = {**result(), "operators": ["add", "mul"]}
        answers: dict[int, httpx.Response] = {}

        def complete(i: int, live: LiveService) -> None:
            answers[i] = httpx.post(f"{live.url}/api/v1/jobs/{jobs[i]}/complete", json=done,
                                    headers=auth(tokens[i]), timeout=30)  # fmt: skip

        held_open = threading.Thread(target=complete, args=(0, first))
        held_open.start()
        assert held.entered.wait(timeout=20)  # the first verdict's row is written, not committed
        racing = threading.Thread(target=complete, args=(1, second))
        racing.start()
        conninfo = make_url(pg_url).set(drivername="postgresql").render_as_string(False)
        deadline = time.monotonic() + 20
        with psycopg.connect(conninfo, autocommit=True) as conn:
            while not conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND query LIKE 'INSERT INTO known_operators%'"
            ).fetchone()[0]:  # type: ignore[index]
                assert time.monotonic() < deadline, "the second verdict never met the first"
                time.sleep(0.05)
        held.release.set()
        for thread in (held_open, racing):
            thread.join(timeout=30)
        assert [answers[i].status_code for i in (0, 1)] == [200, 200], answers[1].text
        known = OperatorCatalog(first.service.db).at("octo/kernels", "a" * 40)
        assert known == {"add", "mul"}


def test_a_drained_runner_says_why_and_its_handed_back_jobs_go_to_others(
    sqlite_svc: LiveService,
) -> None:
    """A runner drained by its jobs' infrastructure errors reports them: the dashboard names
    each public job with its step and error (a private one only as such), `/test help`'s
    reason names no error; its claim skips the jobs it handed back."""
    svc = sqlite_svc
    _, token = svc.register("broken")
    public, _ = svc.service.jobs.create_job(new_job("add"))
    hidden, _ = svc.service.jobs.create_job(dataclasses.replace(new_job("mul"), private=True))
    api = f"{svc.url}/api/v1"
    drained = {
        "since": 1_700_000_000.0,
        "jobs": [
            {"id": public.id, "step": "environment", "error": "venv: no such file: py3"},
            {"id": hidden.id, "step": "checkout", "error": "secret/repo: worktree add failed"},
        ],
    }
    said = httpx.post(
        f"{api}/runners/health",
        json={"healthy": False, "reason": "whatever", "backends": ["cpu"], "drained": drained},
        headers=auth(token),
    )
    assert said.status_code == 204
    reasons = svc.service.runners.unhealthy_reasons("cpu")
    assert reasons == ["broken: drained: its last 2 jobs ended in infrastructure errors"]
    page = httpx.get(f"{svc.url}/").text
    assert f'<a href="/jobs/{public.id}">#{public.id}</a> environment: venv: no such file' in page
    assert "a private job" in page and "secret/repo" not in page
    # Its claim skips what it handed back (both): nothing for it, the next job is.
    skip = {"skip": [public.id, hidden.id]}
    assert httpx.post(f"{api}/jobs/claim", json=skip, headers=auth(token)).status_code == 204
    later, _ = svc.service.jobs.create_job(new_job("sub"))
    got = httpx.post(f"{api}/jobs/claim", json=skip, headers=auth(token))
    assert got.status_code == 200 and got.json()["id"] == later.id
    # Healthy again: the drain is gone.
    healthy = {"healthy": True, "backends": ["cpu"]}
    httpx.post(f"{api}/runners/health", json=healthy, headers=auth(token))
    runner = next(r for r in svc.service.runners.all() if r.name == "broken")
    assert runner.healthy and runner.drained is None and runner.health_reason is None
