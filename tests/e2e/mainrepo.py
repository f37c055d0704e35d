"""A small repository in this project's layout whose default branch is merged into, for the
default branch's own runs: two operators (`gelu`, `drift`), each a wrapper that spends a set
number of microseconds of its thread's CPU time (a deliberate busy-wait standing for its work,
changed by the pull requests that slow it), their tests, and a benchmark harness that compares
the tree with another one in one process (`--baseline TREE`), timing each side in thread CPU
time in alternating rounds: what it reads does not move when the machine is loaded, so a
change of cost is measured as it was made (a wrapper 4 % dearer reads +4.0 %)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tests.support.git import git

OPS = ("gelu", "drift")
BASE_COST_US = 1000

PYPROJECT = """\
[project]
name = "mainops"
version = "0.1.0"
dependencies = []

[project.optional-dependencies]
test = ["pytest>=7"]

[tool.pytest.ini_options]
addopts = "--strict-markers"
markers = ["gelu: the gelu operator", "drift: the drift operator"]
"""

OP = '''\
"""{op}: its wrapper's work is a busy-wait of COST_US microseconds of this thread's CPU time."""
import time

COST_US = {cost}


def {op}(x=None):
    end = time.thread_time_ns() + COST_US * 1000
    while time.thread_time_ns() < end:
        pass
    return x
'''

TESTS = """\
import pytest

from kernels.ops.drift import drift
from kernels.ops.gelu import gelu


@pytest.mark.gelu
def test_gelu():
    assert gelu(3) == 3


@pytest.mark.drift
def test_drift():
    assert drift(3) == 3
"""

HARNESS = '''\
"""The benchmark: each operator timed in its thread's CPU time (kernels.benchmark/v1 JSON);
with --baseline TREE, TREE's operator beside ours, in rounds that take the sides in turn."""
import argparse
import importlib.util
import json
import statistics
import sys
import time
from itertools import permutations
from pathlib import Path

ROUNDS = 8
OPS = ("gelu", "drift")


def load(root, op, name):
    path = Path(root) / "kernels" / "ops" / f"{op}.py"
    if not path.is_file():
        return None
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, op)


def reference(x=None):
    end = time.thread_time_ns() + 500_000
    while time.thread_time_ns() < end:
        pass
    return x


def timed(fn):
    best = None
    for _ in range(3):
        start = time.thread_time_ns()
        fn(1)
        took = (time.thread_time_ns() - start) / 1e6
        best = took if best is None else min(best, took)
    return best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--op")
    p.add_argument("--sizes", default="tiny")
    p.add_argument("--json")
    p.add_argument("--baseline")
    p.add_argument("--budget-s", type=float)
    p.add_argument("--target", type=float)
    a = p.parse_args()
    if a.op not in OPS:
        print(f"unknown op {a.op}", file=sys.stderr)
        return 2
    ours = load(Path.cwd(), a.op, "ours_" + a.op)
    sides = {"reference": reference, "ours": ours}
    if a.baseline:
        base = load(a.baseline, a.op, "base_" + a.op)
        if base is None:
            return 3
        sides["base"] = base
    samples = {name: [] for name in sides}
    orders = list(permutations(sides))
    for n in range(ROUNDS):
        for name in orders[n % len(orders)]:
            samples[name].append(timed(sides[name]))
    ref, kernel = statistics.median(samples["reference"]), statistics.median(samples["ours"])
    row = {"dtype": "float32", "size": [4096, 4096], "reference_ms": ref,
           "kernel_ms": kernel, "speedup": ref / kernel}
    if a.baseline:
        before = statistics.median(samples["base"])
        row.update({"before_kernel_ms": before, "before_speedup": ref / before,
                    "reference_samples_ms": samples["reference"],
                    "kernel_samples_ms": samples["ours"],
                    "before_kernel_samples_ms": samples["base"]})
    doc = {"schema": "kernels.benchmark/v1", "op": a.op, "impl": "active",
           "device": "CPU (thread time)", "vendor": "cpu", "torch": "none", "triton": "none",
           "performance": True, "copy_bandwidth_gbps": None, "rows": [row],
           "arithmetic_mean_speedup": row["speedup"], "geometric_mean_speedup": row["speedup"],
           "compare_mode": "in_process" if a.baseline else None}
    Path(a.json).write_text(json.dumps(doc))
    print("| dtype | Size | Speedup |")
    return 0


sys.exit(main())
'''


def settings(threshold: str = "10%") -> str:
    """The repository's settings: every push to main runs the operators it changed on the cpu
    backend, and its alerts go both ways."""
    return textwrap.dedent(f"""\
        compare:
          threshold: {threshold}
        main:
          on_push: changed
          backends: [cpu]
          alerts: [comment, issue]
          drift_window: 8
        """)


def write_op(repo: Path, op: str, cost_us: int, note: str = "") -> None:
    """`op`'s wrapper at `cost_us`; `note` a comment line (a change that costs nothing)."""
    text = OP.format(op=op, cost=cost_us)
    if note:
        text += f"# {note}\n"
    (repo / "kernels" / "ops" / f"{op}.py").write_text(text)


def make_main_repo(path: Path) -> str:
    """The repository at `path` with its first commit on main (both operators at the base
    cost); main is left checked out. Returns that commit."""
    for folder in ("kernels/ops", "kernels/benchmark", "tests/kernels", ".github"):
        (path / folder).mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    (path / "pyproject.toml").write_text(PYPROJECT)
    for init in ("kernels", "kernels/ops", "kernels/benchmark", "tests", "tests/kernels"):
        (path / init / "__init__.py").write_text("")
    (path / "kernels" / "benchmark" / "__main__.py").write_text(HARNESS)
    (path / "tests" / "kernels" / "test_ops.py").write_text(TESTS)
    (path / ".github" / "ondemand.yml").write_text(settings())
    for op in OPS:
        write_op(path, op, BASE_COST_US)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "operators")
    return git(path, "rev-parse", "HEAD")


def branch_with(repo: Path, branch: str, changes: dict[str, tuple[int, str]]) -> str:
    """A branch off main's tip whose commit sets each operator's cost (and a note), made
    without leaving main (a worktree of its own); its commit."""
    work = repo.parent / f"work-{branch}"
    git(repo, "worktree", "add", "-q", "-b", branch, str(work), "main")
    for op, (cost, note) in changes.items():
        write_op(work, op, cost, note)
    git(work, "commit", "-q", "-am", f"{branch}: {', '.join(changes)}")
    sha = git(work, "rev-parse", "HEAD")
    git(repo, "worktree", "remove", "--force", str(work))
    return sha
