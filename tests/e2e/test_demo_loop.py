"""The loop of `make demo`, end to end: `ondemand demo` as a real process starts the GitHub
sandbox, the service and a cpu runner, comments `/test` on a pull request, and reports.

A small operator selection keeps it quick: the runner gets a workflow directory whose cpu
accuracy step collects the operator's own test file and selects one test function in float32,
and whose benchmark times one dtype in half a second of rounds.
"""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support.workflows import small_cpu_workflows

ROOT = Path(__file__).resolve().parents[2]
OP = "adaptive_max_pool3d_backward"
# Under the interpreter: latencies only, the merge base's beside the pull request's.
TABLE_HEADER = "| dtype | Size | Torch Latency (ms) | Kernel Latency (ms) before → after |"
# The green path's accuracy: 6 upstream shapes x 4 output sizes in float32 of the generic
# implementation (the Moore Threads one runs these grids only where it plans a kernel of its
# own, none of them in float32).
PASSED = 24

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]


def narrowed(directory: Path) -> tuple[Path, dict[str, Any]]:
    """workflows/cpu.yaml with the accuracy step narrowed to one test function in float32 of
    the operator's own test file (collecting every kernel test module would import them all,
    afresh in each job: it writes no bytecode), and the comparison's rounds to half a second
    (six rounds of the four rows fit: their mechanics, not their precision). The steps' pytest
    loads no plugin the host has installed (the kernel tests use none; the runner's own are
    named with -p): a fifth of a second each. The workflow directory and its cpu spec, to
    narrow further and write back (`write`)."""
    small_cpu_workflows(directory)
    cpu = yaml.safe_load((directory / "cpu.yaml").read_text())
    cpu["env"]["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    for step in cpu["steps"]:
        if step["kind"] == "accuracy":
            step["argv"][step["argv"].index("tests/kernels")] = f"tests/kernels/test_{OP}.py"
        if step["kind"] == "benchmark":
            step["compare"]["budget_s"] = 0.5
    return directory, cpu


def write(directory: Path, cpu: dict[str, Any]) -> Path:
    (directory / "cpu.yaml").write_text(yaml.safe_dump(cpu))
    return directory


@pytest.fixture(scope="module")
def small_workflows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write(*narrowed(tmp_path_factory.mktemp("workflows")))


@pytest.fixture(scope="module")
def red_workflows(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """For the red path: the small workflow's accuracy step narrowed to the generic kernel's
    half of its tests and stopped at the first that fails (each failing test is a test of the
    break; more of them prove nothing more, and each costs its failure's report), and a device
    check that passes at once (the green path runs the real one)."""
    directory, cpu = narrowed(tmp_path_factory.mktemp("red-workflows"))
    cpu["device_check"] = ["{python}", "-c", "pass"]
    for step in cpu["steps"]:
        if step["kind"] == "accuracy":
            at = step["argv"].index("-k") + 1
            step["argv"][at] += " and generic"
            step["argv"].append("--maxfail=1")
    return write(directory, cpu)


@pytest.fixture
def interrupted() -> Iterator[list[subprocess.Popen[str]]]:
    """Kept demos the test started, sent Ctrl-C (then killed) if one still runs when the test
    ends: a failed assertion leaves no sandbox, service or runner behind."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)  # the demo stops everything it started
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def run_demo(
    repo: Path, workdir: Path, workflows: Path, *extra: str
) -> tuple[int, dict[str, Any], str]:
    out = workdir / "outcome.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "ondemand",
            "demo",
            "--repo",
            str(repo),
            "--workdir",
            str(workdir),
            "--workflows",
            str(workflows),
            "--json",
            str(out),
            "--timeout",
            "600",
            *extra,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=840,
        env={**os.environ, "COLUMNS": "200"},
    )
    outcome = json.loads(out.read_text()) if out.exists() else {}
    return done.returncode, outcome, done.stdout + done.stderr


def assert_nothing_left(outcome: dict[str, Any], workdir: Path) -> None:
    for pid in outcome["pids"]:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    leftovers = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if str(workdir) in cmdline:
                leftovers.append(cmdline)
    assert not leftovers, leftovers


# A Moore Threads host's Python: CPython 3.10 with torch in its own site-packages, beside the
# runner's own newer Python (devtools/python310-host.sh makes one; .ci/run exports these). The
# green path runs its jobs on it where there is one (CI always has one); the red path keeps
# the runner's own, so both interpreters' ways run end to end.
HOST_PYTHON = os.environ.get("ONDEMAND_TEST_PYTHON310")
HOST_WHEELHOUSE = os.environ.get("ONDEMAND_TEST_WHEELHOUSE310")


def host_python_args() -> list[str]:
    """The demo's runner arguments for jobs on the 3.10 host; none without one (a failure
    under CI, which always makes one)."""
    if not HOST_PYTHON:
        if os.environ.get("CI"):
            pytest.fail("ONDEMAND_TEST_PYTHON310 is not set (devtools/python310-host.sh)")
        return []
    assert sys.version_info[:2] != (3, 10)  # the runner's own is another
    extra = [f"--runner-arg=--python={HOST_PYTHON}"]
    if HOST_WHEELHOUSE:
        extra.append(f"--runner-arg=--wheelhouse={HOST_WHEELHOUSE}")
    return extra


def assert_jobs_ran_on_the_host_python(workdir: Path, base_sha: str) -> None:
    """The job's environment, pytest plugins, probe and compared benchmark ran on CPython
    3.10, what the host lacks coming from the wheelhouse."""
    runner_log = (workdir / "runner.log").read_text()
    assert f"backend cpu: jobs run on {HOST_PYTHON} (Python 3.10." in runner_log, runner_log
    with sqlite3.connect(workdir / "ondemand.db") as db:
        (stored,) = db.execute("SELECT result FROM jobs").fetchone()
    result = json.loads(stored)
    assert result["environment"]["python"].startswith("3.10."), result["environment"]
    assert result["accuracy"]["passed"] == PASSED, result["accuracy"]
    assert result["operators"]  # the operators plugin ran in the job's pytest
    bench = result["benchmark"]
    assert bench["merge_base"] == base_sha  # compared with its merge base
    assert all(row["before_kernel_ms"] is not None for row in bench["rows"])


def test_a_passing_pull_request_gets_a_green_verdict_and_keep_runs_until_ctrl_c(
    tmp_path: Path, small_workflows: Path, interrupted: list[subprocess.Popen[str]]
) -> None:
    """The demo's green path, its jobs on the host's CPython 3.10 where there is one, left
    running with `--keep` (its pages answer after the verdict) until Ctrl-C stops everything
    it started. Its runner keeps no compile cache: no trusted build runs while the demo is
    kept (the red path's demo stops its runner as one starts)."""
    sha = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    workdir = tmp_path / "demo"
    out = workdir / "outcome.json"
    argv = [sys.executable, "-m", "ondemand", "demo", "--keep", "--workdir", str(workdir)]
    argv += ["--workflows", str(small_workflows), "--json", str(out), *host_python_args()]
    argv += ["--runner-arg=--no-compile-cache"]
    demo = subprocess.Popen(
        argv,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"},
    )
    interrupted.append(demo)
    assert demo.stdout is not None
    seen: list[str] = []
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        line = demo.stdout.readline()
        assert line, "".join(seen)
        seen.append(line)
        if "Ctrl-C stops it" in line:
            break
    log = "".join(seen)
    outcome = json.loads(out.read_text())
    assert outcome["verdict"] == "success", log
    assert outcome["base_sha"] == sha  # the pull request changes a kernel on top of it
    assert outcome["sha"] != sha
    comment = outcome["comment"]
    assert comment.startswith(f"<!-- ondemand:{OP}:cpu -->"), comment
    assert "✅" in comment and OP in comment
    counts = re.search(r"(\d+) passed", comment)
    assert counts and int(counts.group(1)) == PASSED, comment
    assert " failed" not in comment.split("\n", 3)[1]
    assert outcome["sha"][:7] in comment
    assert TABLE_HEADER in comment
    assert "float32" in comment and "not performance" in comment
    status = outcome["status"]
    assert status["context"] == f"ondemand/{OP}:cpu"
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/jobs/\d+", status["target_url"])
    # what the terminal showed, as it happened
    assert "reaction" in log and "status ondemand/" in log and "pending" in log
    assert "the result comment on the pull request" in log
    if HOST_PYTHON:
        assert_jobs_ran_on_the_host_python(workdir, outcome["base_sha"])

    # --keep: everything stays up after the verdict, until Ctrl-C
    dashboard = re.search(r"dashboard\s+(http://\S+)", log)
    pull = re.search(r"pull request\s+(http://\S+/pull/\d+)", log)
    assert dashboard and pull, log
    page = httpx.get(pull.group(1), timeout=5)
    assert page.status_code == 200 and "ondemand-bot" in page.text and "✅" in page.text
    time.sleep(1)  # still up after the verdict
    assert httpx.get(dashboard.group(1), timeout=5).status_code == 200
    assert all(os.path.exists(f"/proc/{pid}") for pid in outcome["pids"])
    demo.send_signal(signal.SIGINT)
    rest, _ = demo.communicate(timeout=60)
    assert demo.returncode == 0, log + rest
    with pytest.raises(httpx.TransportError):
        httpx.get(dashboard.group(1), timeout=2)
    assert_nothing_left(outcome, workdir)


def test_a_pull_request_that_breaks_the_kernel_gets_a_red_verdict_with_failing_tests(
    tmp_path: Path, red_workflows: Path
) -> None:
    clone = tmp_path / "clone"
    # One commit deep: the demo's bare clone, the sandbox and the runner's mirror then move one
    # tree, not the project's history (the merge base is the settings commit made below).
    shallow = ["git", "clone", "-q", "--depth", "1", f"file://{ROOT}", str(clone)]
    subprocess.run(shallow, check=True)
    git = ["git", "-c", "user.name=author", "-c", "user.email=author@example.org"]
    # The base's settings: one failing test re-run once each way, enough to tell the break is
    # new (the failure classes' own tests re-run more, and more tests); each re-run is a
    # process that imports torch and runs its tests under the interpreter.
    (clone / ".github").mkdir(exist_ok=True)
    (clone / ".github" / "ondemand.yml").write_text("failures:\n  reruns: 1\n  max_tests: 1\n")
    subprocess.run([*git, "add", ".github/ondemand.yml"], cwd=clone, check=True)
    subprocess.run([*git, "commit", "-qm", "Settings"], cwd=clone, check=True)
    subprocess.run([*git, "checkout", "-qb", "broken"], cwd=clone, check=True)
    # Break the public function, not a kernel detail: the kernels may be rewritten any day.
    kernel = clone / "kernels" / "ops" / "adaptive_max_pool3d_backward" / "__init__.py"
    with kernel.open("a") as source:
        source.write(
            "\n\n_unbroken = adaptive_max_pool3d_backward\n\n\n"
            "def adaptive_max_pool3d_backward(grad_output, input, indices, **kwargs):\n"
            "    return _unbroken(grad_output, input, indices, **kwargs) * 2\n"
        )
    subprocess.run(
        [
            "git",
            "-c",
            "user.name=author",
            "-c",
            "user.email=author@example.org",
            "commit",
            "-qam",
            "Double the gradient",
        ],
        cwd=clone,
        check=True,
    )
    # Accuracy only: the failing tests are what this shows, not the benchmark that follows them.
    # The pull request is the break itself, on `main`.
    rc, outcome, log = run_demo(
        clone, tmp_path / "demo", red_workflows, "--ref", "broken", "--no-change",
        "--flags=--no-bench",
    )  # fmt: skip
    assert rc == 1, log
    assert outcome["verdict"] == "failure", log
    comment = outcome["comment"]
    assert "❌" in comment
    # Re-run on the merge base, where they pass: the failures are this pull request's.
    assert re.search(r"\d+ new failures? · ", comment), comment
    failed = re.search(r"(\d+) failed", comment)
    assert failed and int(failed.group(1)) == 1, comment  # the first stopped the run
    assert "test_upstream_shapes[" in comment, comment
    assert_nothing_left(outcome, tmp_path / "demo")
