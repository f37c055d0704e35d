"""A hostile pull request on a real runner (as root here, dropping to the job user for steps):
its tests try to read the runner's tokens, reach the service, get back into the runner's
network, plant code in the mirror, the cached environment, the logs and the state directory,
run code outside any step, and leave processes behind. Every attempt fails, the job reports
normally, no token is in any log, and the next job is unaffected."""

from __future__ import annotations

import json
import os
import pwd
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from service.app import Service as Parts
from service.app import create_app
from service.queue.jobs import NewJob
from tests.service.helpers import service_settings, sqlite_at_head
from tests.support.git import git
from tests.support.live import live_server
from workflows.models import JobResult, JobStatus
from workflows.spec import WORKFLOWS_DIR

ROOT = Path(__file__).resolve().parents[2]
JOB_USER = "ondemand-job"
REGISTRATION = "hostile-test-registration-token"
ATTACKS = 13  # the ATTACK lines the hostile test prints

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="the runner drops to a job user only when it runs as root"
)

HOSTILE_TESTS = """\
import ctypes, os, site, socket, subprocess, sys
from pathlib import Path

import pytest

STATE, WORK, SERVICE, MARK = {state!r}, {work!r}, ({host!r}, {port}), {mark!r}


def attempt(name, action):
    try:
        action()
    except Exception as exc:
        print(f"ATTACK {{name}}: blocked ({{type(exc).__name__}})", flush=True)
    else:
        print(f"ATTACK {{name}}: SUCCEEDED", flush=True)


def token_in_a_process_environment():
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if b"ONDEMAND_REGISTRATION_TOKEN" in (proc / "environ").read_bytes():
                    return
            except OSError:
                pass
    raise PermissionError("no process environment this step can read holds it")


def back_into_the_runners_network():
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open("/proc/1/ns/net", os.O_RDONLY)
    if libc.setns(fd, 0) != 0:
        raise OSError(ctypes.get_errno(), "setns")


def mirror_hook():
    mirrors = [m for m in Path(WORK, "cache", "mirrors").glob("*") if m.is_dir()]
    if not mirrors:
        raise FileNotFoundError("no mirror to be seen")
    for mirror in mirrors:
        hook = "#!/bin/sh\\ntouch /tmp/" + MARK + "-hook\\n"
        (mirror / "hooks" / "post-checkout").write_text(hook)


def pth_in_the_environment():
    for directory in site.getsitepackages():
        Path(directory, "pwned_" + MARK + ".pth").write_text(
            "import os; open('/tmp/" + MARK + "-pth', 'w').write(str(os.getuid()))\\n"
        )


@pytest.mark.hostile_op
def test_attacks():
    attempt("read the runner's token", lambda: Path(STATE, "runner.json").read_text())
    attempt("read the registration token", token_in_a_process_environment)
    attempt("reach the service", lambda: socket.create_connection(SERVICE, timeout=2).close())
    attempt("setns into the runner's network", back_into_the_runners_network)
    attempt("plant a hook in the mirror", mirror_hook)
    attempt("plant a .pth in the cached environment", pth_in_the_environment)
    for name, where in [
        ("the mirrors", Path(WORK, "cache")),
        ("the logs", Path(WORK, "logs")),
        ("the workspaces", Path(WORK, "jobs")),
        ("the environments", Path(WORK, "envs")),
        ("the state directory", Path(STATE)),
        ("the work directory", Path(WORK)),
    ]:
        plant = where / ("pwned-" + MARK)
        attempt("write into " + name, lambda plant=plant: plant.write_text("x"))
    attempt("become root", lambda: os.setuid(0))
    # processes that try to outlive the job: a new session, and a double fork
    subprocess.Popen(["setsid", "sleep", "{sleep}"])
    subprocess.Popen([sys.executable, "-c",
        "import os, time\\nif os.fork() == 0:\\n    os.setsid()\\n    if os.fork() == 0:\\n"
        "        time.sleep({sleep})\\n"])


@pytest.mark.benign_op
def test_a_clean_environment():
    assert not Path("/tmp", MARK + "-pth").exists(), "a .pth planted by an earlier job ran"
    status = Path("/proc/self/status").read_text()
    print("UID", os.getuid(), "CAPEFF", [l for l in status.splitlines() if l.startswith("CapEff")])
"""

PROBE_BAIT = """\
import os
open("/tmp/{mark}-probe", "w").write(str(os.getuid()))  # imported outside a step: an attack
"""


def make_hostile_repo(path: Path, *, state: Path, work: Path, service: str, mark: str) -> str:
    host, port = service.removeprefix("http://").split(":")
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "pyproject.toml").write_text(
        '[project]\nname = "hostile"\nversion = "0"\n'
        '[project.optional-dependencies]\ntest = ["pytest"]\n'
        "[tool.pytest.ini_options]\n"
        'markers = ["hostile_op: attacks", "benign_op: the next job"]\n'
    )
    tests = path / "tests"
    tests.mkdir()
    (tests / "test_hostile.py").write_text(
        HOSTILE_TESTS.format(
            state=str(state), work=str(work), host=host, port=int(port), mark=mark,
            sleep=3000 + int(mark[:4], 16) % 997,
        )
    )  # fmt: skip
    for bait in ("torch_musa.py", "triton.py"):  # at the root: what a careless probe imports
        (path / bait).write_text(PROBE_BAIT.format(mark=mark))
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "hostile")
    return git(path, "rev-parse", "HEAD")


def test_a_hostile_pull_request_owns_nothing(
    job_user: pwd.struct_passwd, reachable_python: None, base: Path, tmp_path: Path
) -> None:
    settings = service_settings(
        sqlite_at_head(tmp_path / "svc.db"),
        registration_tokens=[REGISTRATION],
        lease_seconds=30,
    )
    app = create_app(settings)
    parts: Parts = app.state.service
    mark = uuid.uuid4().hex
    state, work = base / "runner", base / "runner" / "work"
    workflows = base / "workflows"
    workflows.mkdir()
    cpu = yaml.safe_load((WORKFLOWS_DIR / "cpu.yaml").read_text())
    cpu["device_check"] = ["{python}", "-c", "pass"]
    cpu["steps"] = [
        {
            "name": "accuracy",
            "kind": "accuracy",
            "argv": ["{python}", "-m", "pytest", "tests", "-m", "{op}", "-q", "-s",
                     "-p", "no:cacheprovider", "--junitxml={artifacts}/junit.xml"],
            "timeout_s": 300,
        }
    ]  # fmt: skip
    (workflows / "cpu.yaml").write_text(yaml.safe_dump(cpu))
    with live_server(app) as url:
        sha = make_hostile_repo(base / "origin", state=state, work=work, service=url, mark=mark)
        log_file = (base / "runner.log").open("ab")
        daemon = subprocess.Popen(
            [sys.executable, "-m", "ondemand", "runner", "--service", url, "--backend", "cpu",
             "--name", "hostile-runner", "--state-dir", str(state), "--workflows",
             str(workflows), "--poll-seconds", "1", "--grace-seconds", "2",
             "--job-user", JOB_USER],
            cwd=ROOT,
            env={**os.environ, "ONDEMAND_REGISTRATION_TOKEN": REGISTRATION},
            stdout=log_file,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
        try:

            def run(op: str) -> tuple[JobResult, str]:
                job, _ = parts.jobs.create_job(
                    NewJob(
                        repo="evil/kernels", clone_url=str(base / "origin"), pr_number=1,
                        sha=sha, op=op, backend="cpu", bench=False, compare=False,
                    )
                )  # fmt: skip
                deadline = time.monotonic() + 240
                while not JobStatus(status := parts.jobs.get_job(job.id).status).final:
                    runner_log = (base / "runner.log").read_text()
                    assert time.monotonic() < deadline and daemon.poll() is None, runner_log
                    time.sleep(0.2)
                row = parts.jobs.get_job(job.id)
                assert row.result is not None, status
                return JobResult.model_validate(row.result), parts.logs.read(job.id).decode()

            attacked, attack_log = run("hostile_op")
            # The job reports normally: its test ran, passed, and said what it tried.
            assert attacked.status is JobStatus.succeeded, attack_log
            attacks = [line for line in attack_log.splitlines() if line.startswith("ATTACK ")]
            assert len(attacks) == ATTACKS, attack_log
            assert not [a for a in attacks if "SUCCEEDED" in a], attacks
            # Nothing was planted anywhere, nothing of the checkout ran outside a step.
            assert not list(base.rglob(f"pwned*{mark}*")), list(base.rglob(f"*{mark}*"))
            assert not list(Path("/tmp").glob(f"{mark}-*")), list(Path("/tmp").glob(f"{mark}*"))
            assert not list(work.glob("cache/mirrors/*/hooks/post-checkout"))
            # Nothing it started outlives the job.
            survivors = [
                p.name
                for p in Path("/proc").iterdir()
                if p.name.isdigit()
                and _cmdline(p).startswith(("setsid sleep 3", "sleep 3"))
                and _cmdline(p).split()[-1] == str(3000 + int(mark[:4], 16) % 997)
            ]
            assert survivors == []

            # The next job is unaffected, and it too ran as the job user with no capability.
            clean, clean_log = run("benign_op")
            assert clean.status is JobStatus.succeeded, clean_log
            assert f"UID {job_user.pw_uid} CAPEFF ['CapEff:\\t0000000000000000']" in clean_log

            # No token is in any log the job produced or the runner kept.
            token = json.loads((state / "runner.json").read_text())["token"]
            logs = attack_log + clean_log + json.dumps([attacked.model_dump(mode="json")])
            logs += "".join(p.read_text() for p in (work / "logs").glob("*.log"))
            assert token not in logs and REGISTRATION not in logs
            assert REGISTRATION not in (base / "runner.log").read_text()
        finally:
            daemon.terminate()
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                daemon.kill()
            log_file.close()


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""
