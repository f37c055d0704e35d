"""The daemon in-process against a scripted fake service: result upload retries, the two
signals, and registering again when the service refuses the token. (The real thing, as a
process against the real service, is test_daemon_service.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from ondemand.retry import Backoff
from runner.cli import daemon_main
from runner.daemon.config import DaemonConfig
from runner.daemon.job_runner import note_group
from runner.daemon.pool import Daemon, kill_orphan
from runner.link.client import NotHeld, Rejected, ServiceUnavailable, Unauthorized
from workflows.models import JobResult, JobSpec, JobStatus
from workflows.spec import load_workflows

URL = "http://service.test"
SPEC = JobSpec(id=3, repo="o/r", clone_url="/x", pr_number=1, sha="a" * 40, op="add", backend="cpu")
RESULT = JobResult(status=JobStatus.succeeded, sha="a" * 40)
# No device check: always healthy, and no subprocess.
WORKFLOWS = {"cpu": load_workflows()["cpu"].model_copy(update={"device_check": []})}


class FakeService:
    """The client calls the daemon makes, answered from scripts (an exception is raised)."""

    def __init__(self) -> None:
        self.token: str | None = None
        self.completes: list[str | Exception] = []
        self.claims: list[JobSpec | Exception | None] = []
        self.calls: list[str] = []
        self.registered = 0

    def _next(self, script: list, name: str):  # type: ignore[no-untyped-def,type-arg]
        self.calls.append(name)
        answer = script.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    def register(self, registration_token: str, **_: object) -> tuple[int, str]:
        self.calls.append("register")
        self.registered += 1
        return 8, f"new-{self.registered}"

    def health(
        self,
        healthy: bool,
        reason: str | None,
        backends: list[str],
        drained: dict[str, object] | None = None,
    ) -> None:
        self.calls.append("health")

    def claim(
        self, wait_s: float, backends: list[str] | None = None, skip: list[int] | None = None
    ) -> JobSpec | None:
        return self._next(self.claims, "claim")  # type: ignore[no-any-return]

    def complete(self, job_id: int, result: JobResult) -> str:
        return self._next(self.completes, "complete")  # type: ignore[no-any-return]

    def interrupt(self, job_id: int, reason: str) -> str:
        self.calls.append(f"interrupt {job_id}: {reason}")
        return "queued"


def _daemon(tmp_path: Path, service: FakeService, token: str | None = "reg") -> Daemon:
    config = DaemonConfig(
        service_url=URL,
        name="r1",
        backends=["cpu"],
        state_dir=tmp_path / "state",
        work_dir=tmp_path / "work",
        registration_token=token,
        backoff_max_s=0.01,
        network_isolation=False,
    )
    return Daemon(config, WORKFLOWS, client=service)  # type: ignore[arg-type]


def test_a_result_upload_is_retried_while_the_service_is_unreachable(tmp_path: Path) -> None:
    service = FakeService()
    service.completes = [ServiceUnavailable("down"), ServiceUnavailable("502"), "succeeded"]
    _daemon(tmp_path, service).jobs.report(SPEC, RESULT)
    assert service.calls == ["complete"] * 3


@pytest.mark.parametrize("refusal", [NotHeld("404"), Rejected("422")])
def test_a_refused_result_is_not_retried(tmp_path: Path, refusal: Exception) -> None:
    service = FakeService()
    service.completes = [refusal]
    _daemon(tmp_path, service).jobs.report(SPEC, RESULT)
    assert service.calls == ["complete"]


def test_after_a_second_signal_the_upload_gives_up_after_a_few_tries(tmp_path: Path) -> None:
    service = FakeService()
    service.completes = [ServiceUnavailable("down")] * 10
    daemon = _daemon(tmp_path, service)
    daemon.stop_now.set()
    daemon.jobs.report(SPEC, RESULT)
    assert service.calls == ["complete"] * 5


def test_first_signal_stops_claims_second_cancels_the_jobs(tmp_path: Path) -> None:
    daemon = _daemon(tmp_path, FakeService())
    running = threading.Event()
    daemon.cancels[SPEC.id] = running
    daemon.on_signal(15, None)
    assert daemon.stopping.is_set() and not daemon.stop_now.is_set() and not running.is_set()
    daemon.on_signal(15, None)
    assert daemon.stop_now.is_set() and running.is_set()


def test_a_refused_token_means_registering_again_and_telling_the_health(tmp_path: Path) -> None:
    service = FakeService()
    daemon = _daemon(tmp_path, service)
    creds = daemon.register()
    assert creds is not None and creds.token == "new-1"
    service.token = creds.token
    service.claims = [Unauthorized("401"), None]
    service.calls.clear()
    backoff = Backoff(daemon.retry)
    daemon.workers[0].claim_and_run(backoff)
    assert service.calls == ["health", "claim", "register"]
    assert service.token == "new-2"
    saved = json.loads((tmp_path / "state" / "runner.json").read_text())
    assert saved["token"] == "new-2"
    daemon.workers[0].claim_and_run(backoff)  # the new registration hears the health at once
    assert service.calls[3:] == ["health", "claim"]
    # Another slot refused the old token too: already done, no second registration.
    assert daemon.reregister("new-1") and service.calls.count("register") == 1


def test_without_a_registration_token_a_refused_token_is_the_end(tmp_path: Path) -> None:
    service = FakeService()
    daemon = _daemon(tmp_path, service, token=None)
    service.token = "old"
    assert not daemon.reregister("old")
    assert "register" not in service.calls


def test_job_logs_are_pruned_by_count_and_by_bytes(tmp_path: Path) -> None:
    """The newest logs stay within `keep_logs` files and `keep_log_bytes` in all; the newest
    one stays whatever its size."""
    daemon = _daemon(tmp_path, FakeService())
    logs = tmp_path / "logs"
    logs.mkdir()
    sizes = [300, 200, 200, 100, 50]  # newest first
    for age, size in enumerate(sizes):
        path = logs / f"job-{age}.log"
        path.write_bytes(b"x" * size)
        os.utime(path, (1_000_000 - age, 1_000_000 - age))
    daemon.config.keep_log_bytes = 700
    daemon.jobs.prune_logs(logs)
    assert sorted(p.name for p in logs.iterdir()) == ["job-0.log", "job-1.log", "job-2.log"]
    daemon.config.keep_log_bytes = 10  # smaller than the newest: it stays alone
    daemon.config.keep_logs = 50
    daemon.jobs.prune_logs(logs)
    assert [p.name for p in logs.iterdir()] == ["job-0.log"]
    (logs / "job-9.log").write_bytes(b"")
    os.utime(logs / "job-9.log", (1, 1))
    daemon.config.keep_log_bytes, daemon.config.keep_logs = 10**9, 1
    daemon.jobs.prune_logs(logs)
    assert [p.name for p in logs.iterdir()] == ["job-0.log"]


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--ephemeral", "--slots", "2"], "--ephemeral runs one job: give one slot"),
        (["--ephemeral", "--devices", "0,1"], "--ephemeral runs one job: give one slot"),
        (["--slots", "2", "--devices", "0,1"], "give --slots or --devices, not both"),
    ],
)
def test_slot_options_that_cannot_go_together_are_refused(
    extra: list[str], said: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    argv = ["--service", "http://127.0.0.1:9", "--backend", "cpu", "--state-dir", str(tmp_path)]
    assert daemon_main([*argv, *extra]) == 2
    assert said in capsys.readouterr().err


def test_after_a_crash_every_process_group_of_a_job_is_killed(tmp_path: Path) -> None:
    """A comparison in workers runs two process groups at once; the job's pid file keeps both,
    and a restarted runner kills both (a process elsewhere with a listed pid is spared)."""
    work = tmp_path / "work"
    (work / "jobs").mkdir(parents=True)
    pidfile = work / "jobs" / "slot-0.pgid"
    groups = [
        subprocess.Popen(["sleep", "60"], cwd=work, start_new_session=True) for _ in range(2)
    ]
    elsewhere = subprocess.Popen(["sleep", "60"], cwd=tmp_path, start_new_session=True)
    try:
        for proc in [*groups, elsewhere]:
            note_group(pidfile, proc.pid)
        kill_orphan(pidfile, work)
        assert [proc.wait(timeout=5) for proc in groups] == [-signal.SIGKILL] * 2
        assert elsewhere.poll() is None and not pidfile.exists()
    finally:
        for proc in [*groups, elsewhere]:
            proc.kill()
            proc.wait()


def test_a_crash_of_the_runners_own_code_hands_the_job_back_and_counts_towards_a_drain(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whatever of the runner's own code fails around a job, the job is not the pull
    request's to lose: it goes back to the queue for another runner, and the crash counts."""
    service = FakeService()
    daemon = _daemon(tmp_path, service)
    daemon.fitness.limit = 1

    def crash(*_: object) -> None:
        raise OSError("No space left on device")

    monkeypatch.setattr(daemon.jobs, "execute_job", crash)
    daemon.jobs.run_job(0, SPEC)
    assert service.calls == [
        "interrupt 3: could not run it (runner: OSError: No space left on device)"
    ]
    assert daemon.fitness.handed_back == [3]
    drain = daemon.fitness.drain
    assert drain is not None and drain.jobs[0].step == "runner"
    assert (tmp_path / "state" / "drained.json").exists()
