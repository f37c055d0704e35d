"""A small real git repository in this project's layout, for the runner's tests: a pytest suite
under tests/kernels marked by operator (one passing op, one failing, one that sleeps past any
timeout, one that reports its environment, one that prints 3 MiB and fails, one whose tests take
two seconds each, so its progress can be watched, or `$PACED_S` where a workflow sets it) and a fake
`kernels.benchmark` writing the kernels.benchmark/v1 JSON. Its settings file re-runs no failing
test: the jobs here that fail by design are not about re-runs (those of `failrepo.py` are), and
each re-run is a pytest process; a test that needs them sets its own at its base."""

from __future__ import annotations

import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

PYPROJECT = """\
[project]
name = "tinyops"
version = "0.1.0"
dependencies = []

[project.optional-dependencies]
test = ["pytest>=7"]

[tool.pytest.ini_options]
addopts = "--strict-markers"
markers = [
    "good_op: passes",
    "bad_op: fails",
    "slow_op: sleeps",
    "env_op: reports its environment",
    "loud_op: fails after printing 3 MiB",
    "paced_op: passes, two seconds a test",
]
"""

TESTS = """\
import json
import logging
import os
import socket
import time

import pytest


@pytest.fixture(scope="session", autouse=True)
def _implementation(record_testsuite_property):
    record_testsuite_property("implementation.good_op", "kernels.ops.good_op.good_op")
    record_testsuite_property("implementation.bad_op", "kernels.backends._cpu.ops.bad_op")


@pytest.mark.good_op
@pytest.mark.parametrize("n", [1, 2, 3])
def test_good(n):
    # The proof log a vendor specialization writes, at debug level, and a line that is not one.
    logging.getLogger("tinyops.vendor.ops").debug("TINY_PROOF GOOD_OP path=%s", "ab"[n // 3])
    logging.getLogger("tinyops.vendor.ops").debug("unrelated %d", n)
    assert n > 0


@pytest.mark.good_op
@pytest.mark.parametrize("shape", ["small", "tiny"])
def test_good_skipped(shape):
    pytest.skip("output_size > input size")


@pytest.mark.bad_op
def test_bad_value():
    assert 1 + 1 == 3, "mismatch | at `index` 7"


@pytest.mark.bad_op
def test_bad_fine():
    pass


@pytest.mark.loud_op
def test_loud():
    for n in range(48 * 1024):
        print(f"noise {n:08d} " + "x" * 48)
    assert False, "loud and wrong"


@pytest.mark.paced_op
@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_paced(n):
    time.sleep(float(os.environ.get("PACED_S", "2")))


@pytest.mark.slow_op
def test_slow():
    import subprocess, sys
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    if os.environ.get("SLOW_PIDFILE"):
        with open(os.environ["SLOW_PIDFILE"], "w") as f:
            f.write(str(child.pid))
    time.sleep(600)


@pytest.mark.env_op
def test_env():
    with open(os.path.join(os.environ["ARTIFACTS_DIR"], "env.json"), "w") as f:
        json.dump(dict(os.environ), f)
    try:
        socket.create_connection(("127.0.0.1", int(os.environ["PROBE_PORT"])), timeout=2).close()
        reached = True
    except OSError:
        reached = False
    with open(os.path.join(os.environ["ARTIFACTS_DIR"], "net.json"), "w") as f:
        json.dump({"reached": reached}, f)
"""

# `.github/ondemand.yml`, read at a job's base commit.
SETTINGS = """\
failures:
  reruns: 0
"""

BENCH = '''\
"""A fake benchmark harness writing kernels.benchmark/v1 JSON."""
import argparse
import json
import sys

SPEEDUP = {speedup}

p = argparse.ArgumentParser()
p.add_argument("--op")
p.add_argument("--sizes", default="tiny")
p.add_argument("--json")
a = p.parse_args()
if a.op not in ("good_op", "bad_op", "paced_op"):
    print(f"unknown op {{a.op}}", file=sys.stderr)
    sys.exit(2)
rows = []
for dtype in ("float16", "float32"):
    for size, ref in (([1, 1, 8, 8, 8], 0.02), ([2, 3, 16, 16, 16], 0.04)):
        k = ref / SPEEDUP
        rows.append({{"dtype": dtype, "size": size, "output_size": [4, 4, 4],
                     "reference_ms": ref, "kernel_ms": k, "speedup": ref / k,
                     "gbps": None, "bandwidth_fraction": None}})
doc = {{"schema": "kernels.benchmark/v1", "op": a.op, "impl": "active", "device": "cpu",
       "vendor": "cpu", "torch": "x", "triton": "y", "performance": False,
       "copy_bandwidth_gbps": None, "rows": rows,
       "arithmetic_mean_speedup": SPEEDUP, "geometric_mean_speedup": SPEEDUP}}
with open(a.json, "w") as f:
    json.dump(doc, f)
print("| dtype | Size | Speedup |")
'''


@dataclass(frozen=True)
class TinyRepo:
    path: Path
    base_sha: str  # on main: the op with a 1.5x kernel
    head_sha: str  # on the branch `pr`: a 2.0x kernel (PR ref refs/pull/7/head)


def _git(repo: Path, *args: str) -> str:
    env_args = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    return subprocess.run(
        ["git", *env_args, *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()


def _write(repo: Path, speedup: float) -> None:
    (repo / "tests" / "kernels").mkdir(parents=True, exist_ok=True)
    (repo / "kernels" / "benchmark").mkdir(parents=True, exist_ok=True)
    (repo / "pyproject.toml").write_text(PYPROJECT)
    (repo / "tests" / "__init__.py").write_text("")
    (repo / "tests" / "kernels" / "__init__.py").write_text("")
    (repo / "tests" / "kernels" / "test_ops.py").write_text(TESTS)
    (repo / "kernels" / "__init__.py").write_text("")
    (repo / "kernels" / "benchmark" / "__init__.py").write_text("")
    (repo / "kernels" / "benchmark" / "__main__.py").write_text(
        textwrap.dedent(BENCH.format(speedup=speedup))
    )
    (repo / ".github").mkdir(exist_ok=True)
    (repo / ".github" / "ondemand.yml").write_text(SETTINGS)


def make_tiny_repo(path: Path) -> TinyRepo:
    """The repository: `main` at the base commit, `pr` (and refs/pull/7/head) one ahead."""
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    _write(path, 1.5)
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "base")
    base = _git(path, "rev-parse", "HEAD")
    _git(path, "checkout", "-q", "-b", "pr")
    _write(path, 2.0)
    _git(path, "commit", "-q", "-am", "faster kernel")
    head = _git(path, "rev-parse", "HEAD")
    _git(path, "update-ref", "refs/pull/7/head", head)
    _git(path, "checkout", "-q", "main")
    return TinyRepo(path, base, head)


def add_hidden_commit(repo: TinyRepo) -> str:
    """A commit reachable only from refs/pull/8/head (not from any branch)."""
    _git(repo.path, "checkout", "-q", "--detach", repo.head_sha)
    (repo.path / "NOTE").write_text("only on the PR ref\n")
    _git(repo.path, "add", "NOTE")
    _git(repo.path, "commit", "-q", "-m", "hidden")
    sha = _git(repo.path, "rev-parse", "HEAD")
    _git(repo.path, "update-ref", "refs/pull/8/head", sha)
    _git(repo.path, "checkout", "-q", "main")
    return sha
