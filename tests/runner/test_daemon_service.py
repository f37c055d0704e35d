"""The real runner daemon, as a subprocess, against the real service under uvicorn on loopback,
running the cpu workflow on a real git repository: a passing, a failing and an unknown
operator, a cancellation, a killed runner whose job comes back and then hits the step
timeout, SIGTERM once (the job finishes) and twice (the job is requeued) mid-job, and a runner
whose job Python vanishes (drained, its jobs run elsewhere)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml

from service.app import Service as Parts
from service.app import create_app
from service.db.models import Job, Runner
from service.queue.jobs import NewJob
from tests.runner.tinyrepo import TinyRepo
from tests.service.helpers import service_settings, sqlite_at_head
from tests.support.live import free_port, live_server
from workflows.models import JobResult, JobStatus
from workflows.spec import WORKFLOWS_DIR

ROOT = Path(__file__).resolve().parents[2]
REGISTRATION = "reg-token-for-runner-tests"
STEP_TIMEOUT_S = 5
RETRY_TIMEOUT_S = 2  # a job run again only to time out: no step of it needs to finish
SIGTERM_TIMEOUT_S = 3  # a job that runs to its timeout after a SIGTERM that came at its start
LEASE_S = 6


@dataclass
class Service:
    url: str
    parts: Parts

    def enqueue(self, repo: TinyRepo, op: str, **kw: object) -> int:
        """A job of pull request 7, with its base as the service gives one: the repository's
        settings there re-run no failing test (tests/runner/tinyrepo.py)."""
        job, created = self.parts.jobs.create_job(
            NewJob(
                repo="octo/tinyops",
                clone_url=str(repo.path),
                pr_number=7,
                sha=repo.head_sha,
                op=op,
                backend="cpu",
                base_ref="main",
                base_sha=repo.base_sha,
                **kw,  # type: ignore[arg-type]
            )
        )
        assert created
        return job.id

    def status(self, job_id: int) -> JobStatus:
        job = self.parts.jobs.get_job(job_id)
        assert job is not None
        return JobStatus(job.status)

    def wait(self, job_id: int, *states: JobStatus, timeout: float = 90) -> JobStatus:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.status(job_id)
            if status in states:
                return status
            time.sleep(0.1)
        raise AssertionError(f"job {job_id} is {self.status(job_id)}, not one of {states}")

    def result(self, job_id: int) -> JobResult:
        job = self.parts.jobs.get_job(job_id)
        assert job is not None and job.result is not None
        return JobResult.model_validate(job.result)

    def log(self, job_id: int) -> str:
        return self.parts.logs.read(job_id).decode()


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    db = tmp_path_factory.mktemp("svc") / "ondemand.db"
    settings = service_settings(
        sqlite_at_head(db),
        registration_tokens=[REGISTRATION],
        lease_seconds=LEASE_S,
    )
    app = create_app(settings)
    with live_server(app) as url:
        yield Service(url, app.state.service)


def _test_workflows(directory: Path, *, step_timeout_s: int | None, paced_s: float = 1) -> Path:
    """The cpu workflow with a device check that passes at once, the slow test's pid file,
    `paced_s` a paced test and, with `step_timeout_s`, that step timeout."""
    cpu = yaml.safe_load((WORKFLOWS_DIR / "cpu.yaml").read_text())
    cpu["device_check"] = ["{python}", "-c", "pass"]
    cpu["env"]["SLOW_PIDFILE"] = str(directory / "slow.pid")
    cpu["env"]["PACED_S"] = f"{paced_s:g}"  # paced_op: five tests, stopped twice in the first
    if step_timeout_s is not None:
        for step in cpu["steps"]:
            step["timeout_s"] = step_timeout_s
    (directory / "cpu.yaml").write_text(yaml.safe_dump(cpu))
    return directory


@pytest.fixture(scope="module")
def workflows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """For jobs that are stopped or time out: the step timeout is STEP_TIMEOUT_S."""
    return _test_workflows(tmp_path_factory.mktemp("workflows"), step_timeout_s=STEP_TIMEOUT_S)


@pytest.fixture(scope="module")
def roomy_workflows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """For jobs that must reach their verdict on a loaded machine: the workflow's own timeouts."""
    return _test_workflows(tmp_path_factory.mktemp("workflows"), step_timeout_s=None)


class Daemon:
    """`ondemand runner` as a process; its log in a file. It keeps no compile cache, so it runs
    no trusted build of a job's base after the verdict (tests/runner/test_compile_cache.py's)."""

    def __init__(self, url: str, state: Path, workflows: Path, *extra: str) -> None:
        self.state = state
        self.logfile = (state.parent / f"{state.name}.log").open("ab")
        argv = [
            sys.executable, "-m", "ondemand", "runner",
            "--service", url, "--backend", "cpu", "--name", state.name,
            "--state-dir", str(state), "--workflows", str(workflows),
            "--poll-seconds", "1", "--check-interval", "300",
            "--grace-seconds", "2", "--backoff-max", "2", "--no-job-user",
            "--no-compile-cache", *extra,
        ]  # fmt: skip
        env = {**os.environ, "ONDEMAND_REGISTRATION_TOKEN": REGISTRATION}
        self.proc = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=self.logfile, stderr=subprocess.STDOUT
        )

    def output(self) -> str:
        return (self.state.parent / f"{self.state.name}.log").read_text()

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 60) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"the daemon did not exit:\n{self.output()[-3000:]}") from None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.logfile.close()


@pytest.fixture
def start(service: Service, workflows: Path, tmp_path: Path) -> Iterator:  # type: ignore[type-arg]
    daemons: list[Daemon] = []

    def _start(name: str = "runner-a", *extra: str, workflows_dir: Path | None = None) -> Daemon:
        daemon = Daemon(service.url, tmp_path / name, workflows_dir or workflows, *extra)
        daemons.append(daemon)
        return daemon

    yield _start
    for daemon in daemons:
        daemon.stop()


def _wait_log(service: Service, job_id: int, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while text not in service.log(job_id):
        assert time.monotonic() < deadline, f"{text!r} never in the log of job {job_id}"
        time.sleep(0.1)


def test_pass_fail_unknown_then_sigterm_when_idle(
    service: Service,
    tiny_repo: TinyRepo,
    start,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    good = service.enqueue(tiny_repo, "good_op")
    bad = service.enqueue(tiny_repo, "bad_op", bench=False)
    unknown = service.enqueue(tiny_repo, "good_opp")
    # The real cpu workflow: its device check passes before the first claim.
    daemon = start("runner-a", "--slots", "2", workflows_dir=WORKFLOWS_DIR)
    assert service.wait(good, JobStatus.succeeded, JobStatus.failed, JobStatus.errored) == (
        JobStatus.succeeded
    ), service.log(good)
    assert service.wait(bad, JobStatus.failed, JobStatus.errored) is JobStatus.failed
    assert service.wait(unknown, JobStatus.failed, JobStatus.errored) is JobStatus.failed

    passed = service.result(good)
    assert passed.accuracy is not None and passed.accuracy.passed == 3
    assert passed.benchmark is not None
    assert passed.benchmark.rows[0].before_speedup == pytest.approx(1.5)  # merge base: main
    assert passed.environment.runner_name == "runner-a"
    log = service.log(good)
    assert "step accuracy" in log and "3 passed, 2 skipped" in log
    failed = service.result(bad)
    assert failed.accuracy is not None
    assert failed.accuracy.failures[0].test_id == "tests/kernels/test_ops.py::test_bad_value"
    missing = service.result(unknown)
    assert missing.unknown_op and missing.close_matches[:1] == ["good_op"]
    # Two slots: two jobs ran at the same time.
    spans = [(service.result(j).started_at, service.result(j).finished_at) for j in (good, bad)]
    (a0, a1), (b0, b1) = spans
    assert a0 and a1 and b0 and b1
    assert a0 < b1 and b0 < a1, spans

    # The runner token was kept, private to its owner.
    token_file = tmp_path / "runner-a" / "runner.json"
    assert oct(token_file.stat().st_mode & 0o777) == "0o600"
    token = json.loads(token_file.read_text())["token"]
    for job_id in (good, bad, unknown):
        assert token not in service.log(job_id)

    daemon.signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0
    assert "stopped" in daemon.output()


def test_an_ephemeral_runner_runs_one_job_then_leaves(
    tiny_repo: TinyRepo, roomy_workflows: Path, tmp_path: Path
) -> None:
    """`--ephemeral`: one job, reported, then the runner deregisters (its token no longer
    works, it is not listed) and exits 0, leaving the next job queued; the same state
    directory started again registers anew and takes that job."""
    settings = service_settings(
        sqlite_at_head(tmp_path / "ephemeral.db"), registration_tokens=[REGISTRATION]
    )
    app = create_app(settings)
    with live_server(app) as url:
        service = Service(url, app.state.service)
        first = service.enqueue(tiny_repo, "good_op", bench=False)
        second = service.enqueue(tiny_repo, "bad_op", bench=False)
        state = tmp_path / "runner-e"

        def run_once() -> str:
            """Start an ephemeral runner on `state`; its log once it has exited 0."""
            daemon = Daemon(url, state, roomy_workflows, "--ephemeral")
            try:
                assert daemon.wait(timeout=90) == 0
                return daemon.output()
            finally:
                daemon.stop()

        assert "deregistered" in run_once()
        assert service.status(first) is JobStatus.succeeded, service.log(first)
        assert service.status(second) is JobStatus.queued
        assert not (state / "runner.json").exists()
        assert service.parts.runners.all() == []

        run_once()
        assert service.status(second) is JobStatus.failed, service.log(second)
        jobs = [service.parts.jobs.get_job(j) for j in (first, second)]
        runners = [getattr(j, "runner_id", None) for j in jobs]
        assert None not in runners and runners[0] != runners[1]  # registered anew
        assert service.parts.runners.all() == []


def test_cancellation(tiny_repo: TinyRepo, roomy_workflows: Path, tmp_path: Path) -> None:
    """A cancel reaches a running step in under two seconds through the job's open channel:
    with a 60 s lease the next heartbeat is up to 20 s away, so only the channel can do it."""
    settings = service_settings(
        sqlite_at_head(tmp_path / "cancel.db"),
        registration_tokens=[REGISTRATION],
        lease_seconds=60,
    )
    pidfile = roomy_workflows / "slow.pid"
    pidfile.unlink(missing_ok=True)
    app = create_app(settings)
    with live_server(app) as url:
        service = Service(url, app.state.service)
        job = service.enqueue(tiny_repo, "slow_op", bench=False)
        daemon = Daemon(url, tmp_path / "runner-c", roomy_workflows)
        try:
            _wait_log(service, job, "step accuracy:")
            deadline = time.monotonic() + 30
            while not pidfile.exists():
                assert time.monotonic() < deadline
                time.sleep(0.05)
            child = int(pidfile.read_text())  # a process of the step's group, sleeping 600 s
            # The runner streams the step's structured progress: the one slow test, collected.
            while (service.parts.jobs.get_job(job).progress or {}).get("tests_total") != 1:  # type: ignore[union-attr]
                assert time.monotonic() < deadline, service.parts.jobs.get_job(job).progress  # type: ignore[union-attr]
                time.sleep(0.05)
            assert service.parts.jobs.get_job(job).progress["step"] == "accuracy"  # type: ignore[union-attr,index]
            requested = time.monotonic()
            service.parts.jobs.cancel("octo/tinyops", 7, "cancelled by @maintainer")
            while Path(f"/proc/{child}").exists() and " Z " not in _stat(child):
                assert time.monotonic() - requested < 10, "the step's process outlived the cancel"
                time.sleep(0.01)
            killed = time.monotonic() - requested
            assert killed < 2.0, f"{killed:.2f}s from the cancel to the step's process killed"
            print(f"cancel to kill: {killed:.3f}s")
            assert service.wait(job, JobStatus.cancelled, timeout=30) is JobStatus.cancelled
            result = service.result(job)
            assert result.status is JobStatus.cancelled
            assert result.steps[-1].status.value == "cancelled"
            reason = service.parts.jobs.get_job(job).reason  # type: ignore[union-attr]
            assert reason == "cancelled by @maintainer"
        finally:
            daemon.stop()


def test_killed_runner_job_comes_back(
    service: Service,
    tiny_repo: TinyRepo,
    start,  # type: ignore[no-untyped-def]
    workflows: Path,
    tmp_path: Path,
) -> None:
    pidfile = workflows / "slow.pid"
    pidfile.unlink(missing_ok=True)
    job = service.enqueue(tiny_repo, "slow_op", bench=False)
    first = start("runner-k")
    _wait_log(service, job, "step accuracy:")
    claimed = service.parts.jobs.get_job(job)
    # No earlier runner's claim took it: a runner killed while waiting for a claim's answer
    # never acknowledges it, and its attempt is not spent.
    assert claimed is not None and claimed.attempt == 1, claimed.reason
    deadline = time.monotonic() + 30
    while not pidfile.exists():
        assert time.monotonic() < deadline
        time.sleep(0.1)
    orphan = int(pidfile.read_text())
    first.proc.kill()  # a crash: no result, no cleanup
    first.proc.wait()
    assert Path(f"/proc/{orphan}").exists()  # its step lives on, for now
    # The lease lapses; the service's reaper requeues the job (attempt 2). Woken as the lease
    # ends, it looks then rather than at its next round (up to a quarter lease later).
    deadline = time.monotonic() + LEASE_S * 5
    while (held := service.parts.jobs.get_job(job)).attempt < 2:  # type: ignore[union-attr]
        assert time.monotonic() < deadline, "the job did not come back"
        if _lapsed(held, margin_s=0.0):
            service.parts.reaper.kick()
        time.sleep(0.1)
    # The restarted runner (same state directory) kills the orphan and runs the job again, to
    # its own (shorter) step timeout.
    (tmp_path / "again").mkdir()
    again = _test_workflows(tmp_path / "again", step_timeout_s=RETRY_TIMEOUT_S)
    second = start("runner-k", workflows_dir=again)
    deadline = time.monotonic() + 30
    while Path(f"/proc/{orphan}").exists() and " Z " not in _stat(orphan):
        assert time.monotonic() < deadline, "the orphaned step survived the restart"
        time.sleep(0.1)
    final = service.wait(job, JobStatus.timed_out, JobStatus.errored, timeout=90)
    assert final is JobStatus.timed_out, second.output()[-4000:]
    # Attempt 2 ran to the step timeout: the whole process group was killed and reported.
    result = service.result(job)
    assert result.error_step == "accuracy"
    assert f"timed out after {RETRY_TIMEOUT_S}s" in (result.error_message or "")
    assert "attempt 2" in service.log(job)
    assert "left running by a crashed runner" in second.output()


def _stat(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return " Z "


def test_sigterm_finishes_the_job_and_takes_no_more(
    service: Service,
    tiny_repo: TinyRepo,
    start,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    # A step timeout of 3 s: the signal follows the step's start by the log's half-second
    # flush and a poll, and the job then runs to its end.
    (tmp_path / "brief").mkdir()
    brief = _test_workflows(tmp_path / "brief", step_timeout_s=SIGTERM_TIMEOUT_S)
    job = service.enqueue(tiny_repo, "slow_op", bench=False)
    daemon = start("runner-s", workflows_dir=brief)
    _wait_log(service, job, "step accuracy:")
    waiting = service.enqueue(tiny_repo, "good_op", bench=False)
    daemon.signal(signal.SIGTERM)
    # The current job runs to its end (here: its step timeout), is reported, then the daemon
    # exits without claiming the waiting job.
    assert daemon.wait(timeout=SIGTERM_TIMEOUT_S + 40) == 0
    assert service.status(job) is JobStatus.timed_out
    assert f"timed out after {SIGTERM_TIMEOUT_S}s" in (service.result(job).error_message or "")
    assert service.status(waiting) is JobStatus.queued
    service.parts.jobs.cancel("octo/tinyops", 7, "test cleanup")


def test_second_sigterm_requeues_the_job_for_another_runner(
    service: Service,
    tiny_repo: TinyRepo,
    start,  # type: ignore[no-untyped-def]
    roomy_workflows: Path,
    tmp_path: Path,
) -> None:
    """A runner stopped twice mid-job hands the job back: the pull request is not at fault,
    so it runs again (attempt 2) on the next runner and reaches its own verdict."""
    job = service.enqueue(tiny_repo, "paced_op", bench=False)
    daemon = start("runner-s2", workflows_dir=roomy_workflows)
    _wait_log(service, job, "step accuracy:")
    daemon.signal(signal.SIGTERM)
    time.sleep(0.5)
    daemon.signal(signal.SIGTERM)
    assert daemon.wait(timeout=30) == 0
    requeued = service.parts.jobs.get_job(job)
    assert requeued is not None and JobStatus(requeued.status) is JobStatus.queued
    assert requeued.attempt == 2 and requeued.runner_id is None
    assert requeued.reason == "runner-s2 stopped (SIGTERM); requeued"
    # The next runner only has to reach the verdict: its paced tests take a tenth as long.
    (tmp_path / "brisk").mkdir()
    brisk = _test_workflows(tmp_path / "brisk", step_timeout_s=None, paced_s=0.1)
    other = start("runner-s3", workflows_dir=brisk)
    final = service.wait(job, JobStatus.succeeded, JobStatus.failed, JobStatus.errored)
    assert final is JobStatus.succeeded, other.output()[-3000:]
    done = service.parts.jobs.get_job(job)
    assert done is not None and done.attempt == 2 and done.runner_name == "runner-s3"
    assert "attempt 2" in service.log(job)


def test_sick_device_stops_claims_and_is_reported(
    service: Service, tiny_repo: TinyRepo, workflows: Path, tmp_path: Path
) -> None:
    sick = tmp_path / "sick-workflows"
    sick.mkdir()
    cpu = yaml.safe_load((workflows / "cpu.yaml").read_text())
    cpu["device_check"] = ["{python}", "-c", "raise SystemExit('no device here')"]
    (sick / "cpu.yaml").write_text(yaml.safe_dump(cpu))
    daemon = Daemon(service.url, tmp_path / "runner-sick", sick)
    try:
        deadline = time.monotonic() + 30
        sick = service.parts.runners.unhealthy_reasons
        while not any("no device here" in r for r in sick("cpu")):
            assert time.monotonic() < deadline, daemon.output()
            time.sleep(0.1)
        job = service.enqueue(tiny_repo, "good_op", bench=False)
        time.sleep(2)  # two of a claim's polls (--poll-seconds 1); its next check is 30 s away
        assert service.status(job) is JobStatus.queued  # nobody healthy claims it
        daemon.signal(signal.SIGTERM)
        assert daemon.wait(timeout=40) == 0
        assert "not claiming for cpu: device check failed: no device here" in daemon.output()
    finally:
        daemon.stop()
        service.parts.jobs.cancel("octo/tinyops", 7, "test cleanup")


def test_unreachable_service_backs_off_and_stops_on_sigterm(
    workflows: Path, tmp_path: Path
) -> None:
    # A port bound here but not listening refuses connections, and no other test (or xdist
    # worker) can start a server on it meanwhile.
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    daemon = Daemon(url, tmp_path / "runner-lonely", workflows)
    try:
        deadline = time.monotonic() + 30
        while daemon.output().count("cannot register") < 2:
            assert time.monotonic() < deadline, daemon.output()
            time.sleep(0.1)
        assert "retrying in" in daemon.output()
        daemon.signal(signal.SIGTERM)
        assert daemon.wait(timeout=10) == 0
    finally:
        daemon.stop()
        closed.close()


def test_a_refused_runner_token_means_registering_again(
    service: Service, tiny_repo: TinyRepo, roomy_workflows: Path, tmp_path: Path
) -> None:
    state = tmp_path / "runner-forgotten"
    state.mkdir()
    # A token the service does not know (say its database was reset).
    (state / "runner.json").write_text(
        json.dumps({"service_url": service.url, "runner_id": 999, "token": "forgotten"})
    )
    job = service.enqueue(tiny_repo, "good_op", bench=False)
    daemon = Daemon(service.url, state, roomy_workflows)
    try:
        assert service.wait(job, JobStatus.succeeded, JobStatus.failed, JobStatus.errored) is (
            JobStatus.succeeded
        )
        assert "no longer knows this runner" in daemon.output()
        assert json.loads((state / "runner.json").read_text())["token"] != "forgotten"
    finally:
        daemon.stop()


def test_a_step_that_floods_its_output_leaves_a_capped_log(
    service: Service,
    tiny_repo: TinyRepo,
    start,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    """A pull request printing 3 MiB: the service and the runner keep 64 KiB, the head and
    the end (pytest's verdict, the runner's last lines), with a note of what was cut."""
    job = service.enqueue(tiny_repo, "loud_op", bench=False)
    start("runner-a", "--log-max-bytes", "65536")
    assert service.wait(job, JobStatus.failed, JobStatus.errored) is JobStatus.failed
    _wait_log(service, job, "step accuracy: exit 1")
    log = service.log(job)
    assert len(log.encode()) <= 65536
    assert log.startswith("[ondemand] job ")
    assert "the middle is cut" in log and "bytes cut here" in log
    assert "1 failed" in log.split("bytes cut here")[1]  # the verdict survived the cut
    local = tmp_path / "runner-a" / "work" / "logs" / f"job-{job}.log"
    assert local.read_text() == log


def test_a_service_down_longer_than_the_lease_does_not_run_a_job_twice(
    tiny_repo: TinyRepo, roomy_workflows: Path, tmp_path: Path
) -> None:
    """The service stops while a runner works until the job's lease has lapsed; on restart the
    runner's heartbeats come first, so the job stays attempt 1 on its runner (it used to be
    requeued at once, run again, and end "runner lost")."""
    port = free_port()
    settings = service_settings(
        sqlite_at_head(tmp_path / "restart.db"),
        registration_tokens=[REGISTRATION],
        lease_seconds=4,
    )
    first = create_app(settings)
    with live_server(first, port=port) as url:
        service = Service(url, first.state.service)
        job = service.enqueue(tiny_repo, "slow_op", bench=False)
        daemon = Daemon(url, tmp_path / "runner-r", roomy_workflows)
        try:
            _wait_log(service, job, "step accuracy:")
        except AssertionError:
            daemon.stop()
            raise
    try:
        # Down until the lease has lapsed unheard (a second past its end, as the database
        # says): a reaper that looked now would requeue the job.
        deadline = time.monotonic() + 3 * settings.lease_seconds
        while not _lapsed(service.parts.jobs.get_job(job), margin_s=1.0):
            assert time.monotonic() < deadline, "the lease never lapsed"
            time.sleep(0.1)
        second = create_app(settings)
        with live_server(second, port=port) as url:
            service = Service(url, second.state.service)
            # Past the grace, a reaper's round: the one the service runs would look next.
            reaper = second.state.service.reaper
            deadline = time.monotonic() + 3 * settings.lease_seconds
            while reaper.deaf_for() > 0:
                assert time.monotonic() < deadline, "the reaper's grace never ended"
                time.sleep(0.1)
            reaper.run_once()
            held = service.parts.jobs.get_job(job)
            assert held is not None and held.status == JobStatus.running, held and held.reason
            assert held.attempt == 1 and held.runner_name == "runner-r", held.reason
            service.parts.jobs.cancel("octo/tinyops", 7, "cancelled by @maintainer")
            assert service.wait(job, JobStatus.cancelled, timeout=30) is JobStatus.cancelled
            assert service.parts.jobs.get_job(job).attempt == 1  # type: ignore[union-attr]
            assert "attempt 2" not in service.log(job)
    finally:
        daemon.stop()


def _lapsed(job: Job | None, margin_s: float) -> bool:
    """Whether `job`'s lease ended more than `margin_s` ago."""
    assert job is not None and job.lease_expires_at is not None, "the job holds no lease"
    return job.lease_expires_at < datetime.now(UTC) - timedelta(seconds=margin_s)


@contextlib.contextmanager
def _claim_answered_while_stopped(
    tiny_repo: TinyRepo, roomy_workflows: Path, tmp_path: Path
) -> Iterator[tuple[Service, Daemon, int]]:
    """A service (3 s leases) and a runner stopped (SIGSTOP, a host frozen) while its claim
    waits, whose claim the service then answered with a job: the answer waits in the stopped
    runner's socket. Yields the service, the runner (continued by the caller) and the job."""
    settings = service_settings(
        sqlite_at_head(tmp_path / "stale.db"), registration_tokens=[REGISTRATION], lease_seconds=3
    )
    app = create_app(settings)
    with live_server(app) as url:
        service = Service(url, app.state.service)
        daemon = Daemon(url, tmp_path / "runner-z", roomy_workflows, "--poll-seconds", "20")
        try:
            deadline = time.monotonic() + 60
            while "HTTP Request: POST" not in daemon.output() or "claim" not in daemon.output():
                assert time.monotonic() < deadline, daemon.output()
                time.sleep(0.1)
            time.sleep(1.0)  # its claim waits now
            daemon.signal(signal.SIGSTOP)
            job = service.enqueue(tiny_repo, "good_op", bench=False)
            service.wait(job, JobStatus.running, timeout=10)  # the claim was answered
            yield service, daemon, job
        finally:
            daemon.signal(signal.SIGCONT)
            daemon.stop()


def test_a_claim_answered_while_the_runner_was_stopped_is_not_started_when_stale(
    tiny_repo: TinyRepo, roomy_workflows: Path, tmp_path: Path
) -> None:
    """A runner stopped (SIGSTOP, a host frozen) while its claim waits: the service answers
    the claim with a job, the answer waits in the stopped runner's socket, the claim is never
    acknowledged and the job goes back to the queue and ends elsewhere (here: cancelled).
    When the runner is continued it reads that stale answer: it must ask the service first,
    and not start a job whose verdict is already given."""
    with _claim_answered_while_stopped(tiny_repo, roomy_workflows, tmp_path) as (
        service,
        daemon,
        job,
    ):
        service.wait(job, JobStatus.queued, timeout=30)  # never acknowledged: back
        claimed = service.parts.jobs.get_job(job)
        assert claimed is not None and claimed.attempt == 1
        service.parts.jobs.cancel("octo/tinyops", 7, "cancelled by @maintainer")
        assert service.status(job) is JobStatus.cancelled
        daemon.signal(signal.SIGCONT)
        _wait_output(daemon, f"job {job} was given to another runner meanwhile; not started", 30)
        log = daemon.output()
        assert f"slot 0: job {job}: good_op on cpu" not in log, log[-3000:]
        assert service.status(job) is JobStatus.cancelled
        assert service.log(job) == ""


def test_a_claim_answered_while_the_runner_was_stopped_and_then_cancelled_is_not_started(
    tiny_repo: TinyRepo, roomy_workflows: Path, tmp_path: Path
) -> None:
    """As above, but the job is cancelled while the stopped runner still holds its lease:
    continued, the runner's first heartbeat hears the cancel, and it reports the stop without
    starting anything of the job."""
    with _claim_answered_while_stopped(tiny_repo, roomy_workflows, tmp_path) as (
        service,
        daemon,
        job,
    ):
        service.parts.jobs.cancel("octo/tinyops", 7, "cancelled by @maintainer")
        daemon.signal(signal.SIGCONT)
        _wait_output(daemon, f"job {job}: report", 30)
        log = daemon.output()
        assert f"slot 0: job {job}: good_op on cpu" not in log, log[-3000:]
        assert f"job {job} was stopped before it started" in log, log[-3000:]
        assert service.status(job) is JobStatus.cancelled
        assert service.log(job) == ""


def test_a_runner_whose_job_python_vanishes_is_drained_and_its_jobs_succeed_elsewhere(
    service: Service,
    tiny_repo: TinyRepo,
    start,  # type: ignore[no-untyped-def]
    roomy_workflows: Path,
    tmp_path: Path,
) -> None:
    """A runner whose job Python is gone hands each job back (attempt 2, never claimed by it
    again) and is drained after --drain-after of them: another runner runs them to their
    verdicts, the drained one claims nothing more, the service shows why, and an operator's
    undrain (once the Python is back) gives it jobs again."""
    pyhost = tmp_path / "pyhost"  # the job Python: this venv, reached through a link
    pyhost.symlink_to(Path(sys.prefix), target_is_directory=True)
    broken = start(
        "runner-py", "--python", f"cpu={pyhost}/bin/python", "--drain-after", "2",
        workflows_dir=roomy_workflows,
    )  # fmt: skip
    _wait_output(broken, "device checks pass for cpu")  # checked with it: cached a while
    pyhost.unlink()  # the job Python vanishes
    jobs = [service.enqueue(tiny_repo, op, bench=False) for op in ("good_op", "bad_op")]
    _wait_output(broken, "drained: its last 2 jobs")
    _wait_output(broken, f"job {jobs[-1]}: hand back")  # the drain is logged before it
    for job_id in jobs:
        handed = service.parts.jobs.get_job(job_id)
        assert handed is not None and handed.attempt == 2, broken.output()[-3000:]
        assert handed.reason is not None and handed.reason.startswith(
            "runner-py could not run it (environment: "
        )
    deadline = time.monotonic() + 10
    while not (me := _runner(service, "runner-py")).drained:  # reported
        assert time.monotonic() < deadline
        time.sleep(0.1)
    # Both, in either order: a runner killed by the test before may leave a claim waiting in
    # the service that takes the first job unacknowledged, so this one takes the second first.
    assert sorted(j["id"] for j in me.drained["jobs"]) == jobs and not me.healthy
    assert "runner-py: drained: its last 2 jobs" in " ".join(
        service.parts.runners.unhealthy_reasons("cpu")
    )
    # Drained, it claims nothing: not the jobs it handed back, nor a new one.
    waiting = _enqueue(service, tiny_repo, "good_op", pr=8)
    time.sleep(2)
    assert [service.status(j) for j in (*jobs, waiting)] == [JobStatus.queued] * 3
    # Undrained by an operator once its Python is back, it takes the new job; another runner
    # takes those it handed back, each to its own verdict.
    pyhost.symlink_to(Path(sys.prefix), target_is_directory=True)
    undrain = subprocess.run(
        [sys.executable, "-m", "ondemand", "runner", "--undrain", "--state-dir", str(broken.state)],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    assert "undrained (was drained: its last 2 jobs" in undrain.stdout
    service.wait(waiting, JobStatus.running, JobStatus.succeeded, timeout=30)
    other = start("runner-ok", workflows_dir=roomy_workflows)
    ok, failed = JobStatus.succeeded, JobStatus.failed
    verdicts = {waiting: ok, jobs[0]: ok, jobs[1]: failed}
    for job_id, verdict in verdicts.items():
        final = service.wait(job_id, JobStatus.succeeded, JobStatus.failed, JobStatus.errored)
        assert final is verdict, (broken.output()[-2000:], other.output()[-2000:])
        done = service.parts.jobs.get_job(job_id)
        assert done is not None
        assert done.runner_name == ("runner-py" if job_id == waiting else "runner-ok")
    assert "undrained by an operator" in broken.output()
    assert _runner(service, "runner-py").healthy


def _enqueue(service: Service, repo: TinyRepo, op: str, pr: int) -> int:
    job, created = service.parts.jobs.create_job(
        NewJob(repo="octo/tinyops", clone_url=str(repo.path), pr_number=pr, sha=repo.head_sha,
               op=op, backend="cpu", base_ref="main", base_sha=repo.base_sha, bench=False)
    )  # fmt: skip
    assert created
    return job.id


def _wait_output(daemon: Daemon, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while text not in daemon.output():
        assert time.monotonic() < deadline, daemon.output()[-3000:]
        time.sleep(0.1)


def _runner(service: Service, name: str) -> Runner:
    return next(r for r in service.parts.runners.all() if r.name == name)
