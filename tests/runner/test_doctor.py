"""`ondemand doctor runner`: each planted fault is found and named with the fix: a runner token
the service refused, no device (the workflow's check fails with the job's Python), no job
Python with the vendor's stack, a repository git cannot reach; and a healthy host passes."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from ondemand.doctor import Finding, Level
from runner.daemon.fitness import Blame, Drain, Outcome, write_drain
from runner.doctor import (
    backend_findings,
    drain_findings,
    git_findings,
    package_findings,
    service_findings,
)
from runner.environment.pyenv import PackageSources
from runner.link.credentials import CredentialFile, Credentials
from tests.service.helpers import LiveService, live_service, service_settings, sqlite_at_head
from tests.support.git import git
from tests.support.live import free_port
from workflows.spec import load_workflows

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def svc(tmp_path: Path) -> Iterator[LiveService]:
    with live_service(service_settings(sqlite_at_head(tmp_path / "svc.db"))) as live:
        yield live


def levels(findings: list[Finding]) -> dict[str, Level]:
    return {f.check: f.level for f in findings}


def test_a_runner_token_the_service_refused_is_named(svc: LiveService, tmp_path: Path) -> None:
    state = tmp_path / "state"
    CredentialFile(state / "runner.json", svc.url).save(Credentials(99, "not-a-token"))
    found, _ = service_findings(svc.url, state, None)
    assert levels(found) == {"service": Level.ok, "runner token": Level.fail}
    assert "refused runner 99's token" in found[1].detail
    assert "delete" in found[1].fix and "runner.json" in found[1].fix
    runner_id, token = svc.register("r1", ["cpu"])
    CredentialFile(state / "runner.json", svc.url).save(Credentials(runner_id, token))
    found, repositories = service_findings(svc.url, state, None)
    assert levels(found) == {"service": Level.ok, "runner token": Level.ok}
    assert f"runner {runner_id} (r1) serving cpu" in found[1].detail
    assert repositories == []  # no job yet


def test_no_token_and_no_registration_token_fails_and_an_absent_service_is_named(
    svc: LiveService, tmp_path: Path
) -> None:
    found, _ = service_findings(svc.url, tmp_path / "state", None)
    assert found[1].level is Level.fail and "ONDEMAND_REGISTRATION_TOKEN" in found[1].fix
    found, _ = service_findings(svc.url, tmp_path / "state", "reg-token")
    assert found[1].level is Level.ok and "not registered yet" in found[1].detail
    gone = f"http://127.0.0.1:{free_port()}"
    (found_gone,), _ = service_findings(gone, tmp_path / "state", "reg-token")
    assert found_gone.level is Level.fail and "ONDEMAND_SERVICE_URL" in found_gone.fix


def test_no_device_is_found_with_the_checks_own_words(tmp_path: Path) -> None:
    workflow = load_workflows()["cpu"].model_copy(
        update={"device_check": ["{python}", "-c", "raise SystemExit('no device in slot 0')"]}
    )
    found, python = backend_findings(workflow, None, tmp_path / "home", None)
    assert python is not None and python.own
    assert levels(found)["python (cpu)"] is Level.ok
    device = next(f for f in found if f.check == "device (cpu)")
    assert device.level is Level.fail and "no device in slot 0" in device.detail
    healthy, _ = backend_findings(load_workflows()["cpu"], None, tmp_path / "home", None)
    assert levels(healthy)["device (cpu)"] is Level.ok
    versions = next(f for f in healthy if f.check == "versions (cpu)")
    assert "torch " in versions.detail and "triton " in versions.detail


def test_no_python_with_the_vendors_stack_is_named(tmp_path: Path) -> None:
    found, python = backend_findings(load_workflows()["mthreads"], None, tmp_path / "h", None)
    assert python is None
    (finding,) = found
    assert finding.level is Level.fail and "torch_musa" in finding.detail
    assert "--python mthreads=PATH" in finding.fix


def test_git_reaches_a_repository_or_says_how_to_let_it(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a").write_text("a\n")
    git(repo, "add", "a")
    git(repo, "commit", "-q", "-m", "a")
    (reached,) = git_findings([str(repo)])
    assert reached.level is Level.ok
    (blocked,) = git_findings([f"http://127.0.0.1:{free_port()}/acme/kernels.git"])
    assert blocked.level is Level.fail and "insteadOf" in blocked.fix
    (none,) = git_findings([])
    assert none.level is Level.warn and "--git-url" in none.fix


def test_a_wheelhouse_is_looked_into(tmp_path: Path) -> None:
    assert package_findings(PackageSources())[0].level is Level.warn
    empty = tmp_path / "wheels"
    empty.mkdir()
    assert package_findings(PackageSources(wheelhouse=empty))[0].level is Level.warn
    (empty / "x-1.0-py3-none-any.whl").write_bytes(b"")
    assert "1 wheels" in package_findings(PackageSources(wheelhouse=empty))[0].detail
    missing = package_findings(PackageSources(wheelhouse=tmp_path / "absent"))[0]
    assert missing.level is Level.fail


def test_a_healthy_runner_host_passes_the_command(svc: LiveService, tmp_path: Path) -> None:
    workflows = tmp_path / "workflows"
    workflows.mkdir()
    spec = yaml.safe_load((ROOT / "workflows" / "cpu.yaml").read_text())
    (workflows / "cpu.yaml").write_text(yaml.safe_dump(spec))
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONDEMAND_")}
    env["ONDEMAND_REGISTRATION_TOKEN"] = "reg-token"
    argv = [sys.executable, "-m", "ondemand", "doctor", "runner", "--service", svc.url,
            "--backend", "cpu", "--state-dir", str(tmp_path / "state"), "--no-job-user",
            "--workflows", str(workflows), "--git-url", str(ROOT)]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    for line in ("✓ service", "✓ runner token", "✓ python (cpu)", "✓ device (cpu)", "✓ git"):
        assert line in done.stdout, done.stdout


@pytest.mark.parametrize(
    ("token", "says"),
    [("wrong", "none of the service's ONDEMAND_REGISTRATION_TOKENS"), (None, "no registration")],
)
def test_a_runner_that_cannot_register_exits_2_naming_the_setting(
    svc: LiveService, tmp_path: Path, token: str | None, says: str
) -> None:
    """Exit 2 is a configuration error: the units do not restart it every 10 s."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONDEMAND_")}
    if token:
        env["ONDEMAND_REGISTRATION_TOKEN"] = token
    argv = [sys.executable, "-m", "ondemand", "runner", "--service", svc.url, "--backend",
            "cpu", "--state-dir", str(tmp_path / "state"), "--no-job-user"]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "ONDEMAND_REGISTRATION_TOKEN" in done.stderr, done.stderr


def test_a_job_python_that_cannot_serve_stops_the_runner_with_exit_2(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONDEMAND_")}
    argv = [sys.executable, "-m", "ondemand", "runner", "--service", "http://127.0.0.1:9",
            "--backend", "cpu", "--state-dir", str(tmp_path / "state"), "--no-job-user",
            "--python", str(tmp_path / "no-python")]  # fmt: skip
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "--python for cpu" in done.stderr and "cannot run it" in done.stderr


def test_a_drained_runner_is_named_with_its_jobs_errors(tmp_path: Path) -> None:
    [fine] = drain_findings(tmp_path)
    assert fine.level is Level.ok
    gone = Outcome(41, Blame.runner, "environment", "venv: No such file: /opt/py/bin/python")
    write_drain(tmp_path / "drained.json", Drain((gone,), 1_800_000_000.0))
    [drained] = drain_findings(tmp_path)
    assert drained.level is Level.fail
    assert "since 2027-01-15 08:00 UTC, drained: its last 1 jobs" in drained.detail
    assert "job 41 (environment: venv: No such file: /opt/py/bin/python)" in drained.detail
    assert f"ondemand runner --undrain --state-dir {tmp_path}" in drained.fix
