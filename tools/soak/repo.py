"""The soak repositories: a tiny kernel library in this project's layout (`kernels/ops/<op>/`,
`tests/kernels` marked by operator, a `kernels.benchmark` harness that writes the
kernels.benchmark/v1 JSON at once) whose tests take about a second and mostly sleep, so eight
runners fit on two cores. Each pull request's branch is a chain of versions to push through;
written with one `git fast-import`, so a few hundred commits take well under a second."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

# The operators and their verdicts: gamma fails, delta takes three seconds (long enough for
# a cancel or a push to find it running).
OPERATORS = ("alpha", "beta", "gamma", "delta")
VERDICTS = {"alpha": "succeeded", "beta": "succeeded", "gamma": "failed", "delta": "succeeded"}

PYPROJECT = """\
[project]
name = "soakops"
version = "0.1.0"
dependencies = []

[project.optional-dependencies]
test = ["pytest>=7"]

[tool.pytest.ini_options]
addopts = "--strict-markers"
markers = [
    "alpha: passes",
    "beta: passes",
    "gamma: fails",
    "delta: passes, slowly",
]
"""

TESTS = """\
import time

import pytest

from kernels.ops import alpha, beta, delta, gamma


@pytest.mark.alpha
@pytest.mark.parametrize("n", [1, 2])
def test_alpha(n):
    time.sleep(0.5)
    assert alpha.VALUE >= 0


@pytest.mark.beta
def test_beta():
    time.sleep(1.0)
    assert beta.VALUE >= 0


@pytest.mark.gamma
def test_gamma():
    time.sleep(0.5)
    assert gamma.VALUE >= 0, "gamma is wrong"


@pytest.mark.delta
@pytest.mark.parametrize("n", [1, 2, 3])
def test_delta(n):
    time.sleep(1.0)
    assert delta.VALUE >= 0
"""

BENCH = '''\
"""A harness that writes kernels.benchmark/v1 JSON at once (the soak measures the service)."""
import argparse
import json

p = argparse.ArgumentParser()
p.add_argument("--op")
p.add_argument("--sizes", default="tiny")
p.add_argument("--json")
a = p.parse_args()
rows = [
    {"dtype": "float32", "size": [1, 1, 8, 8, 8], "output_size": [4, 4, 4],
     "reference_ms": 0.02, "kernel_ms": 0.01, "speedup": 2.0, "gbps": None,
     "bandwidth_fraction": None}
]
doc = {"schema": "kernels.benchmark/v1", "op": a.op, "impl": "active", "device": "cpu",
       "vendor": "cpu", "torch": "x", "triton": "y", "performance": False,
       "copy_bandwidth_gbps": None, "rows": rows,
       "arithmetic_mean_speedup": 2.0, "geometric_mean_speedup": 2.0}
with open(a.json, "w") as f:
    json.dump(doc, f)
'''

WORKFLOW = """\
name: cpu
description: The soak repositories' quick steps.
aliases: [interpreter]
labels: [cpu]
vendor: cpu
device_check: ["{python}", "-c", "pass"]
steps:
  - name: accuracy
    kind: accuracy
    argv: ["{python}", "-m", "pytest", "tests/kernels", "-m", "{op}", "-q",
           "-p", "no:cacheprovider", "--junitxml={artifacts}/junit.xml"]
    timeout_s: 60
  - name: benchmark
    kind: benchmark
    argv: ["{python}", "-m", "kernels.benchmark", "--op", "{op}",
           "--json", "{artifacts}/benchmark.json"]
    compare:
      budget_s: 1
      max_rounds: 1
    timeout_s: 60
python_env:
  extras: [test]
"""


@dataclass(frozen=True)
class SoakRepo:
    """One repository: where it lives, its main branch's commit, and per pull-request branch
    the versions in order (the branch points at the last; a pull request opens at the first
    and is pushed through the rest)."""

    name: str
    path: Path
    base_sha: str
    versions: dict[str, list[str]]


def _data(text: str) -> str:
    raw = text.encode()
    return f"data {len(raw)}\n{text}\n"


def _files(values: dict[str, int]) -> list[tuple[str, str]]:
    files = [
        ("pyproject.toml", PYPROJECT),
        ("kernels/__init__.py", ""),
        ("kernels/ops/__init__.py", ""),
        ("kernels/benchmark/__init__.py", ""),
        ("kernels/benchmark/__main__.py", BENCH),
        ("tests/__init__.py", ""),
        ("tests/kernels/__init__.py", ""),
        ("tests/kernels/test_ops.py", TESTS),
    ]
    for op in OPERATORS:
        sign = -1 if op == "gamma" else 1
        files.append((f"kernels/ops/{op}/__init__.py", f"VALUE = {sign * values[op]}\n"))
    return files


def make_repo(path: Path, name: str, branches: int, versions: int) -> SoakRepo:
    """A git repository at `path`: `main`, and `pr-0`… each changing one or two operators'
    own files, `versions` commits deep (each version changes the first operator again)."""
    path.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    stream: list[str] = []
    mark = 0
    who = "committer Soak <soak@example.com> 1700000000 +0000\n"

    def commit(ref: str, message: str, parent: int | None, changes: list[tuple[str, str]]) -> int:
        nonlocal mark
        mark += 1
        stream.append(f"commit {ref}\nmark :{mark}\n{who}{_data(message)}")
        if parent is not None:
            stream.append(f"from :{parent}\n")
        for file, text in changes:
            stream.append(f"M 100644 inline {file}\n{_data(text)}")
        stream.append("\n")
        return mark

    base = commit("refs/heads/main", "base", None, _files({op: 1 for op in OPERATORS}))
    chains: dict[str, list[int]] = {}
    for b in range(branches):
        ops = [OPERATORS[b % len(OPERATORS)]]
        if b % 3 == 2:
            ops.append(OPERATORS[(b + 1) % len(OPERATORS)])
        parent, chain = base, []
        for v in range(versions):
            changes = [(f"kernels/ops/{op}/__init__.py", f"VALUE = {2 + v}\n") for op in ops]
            if "gamma" in ops:
                changes = [
                    (f, t.replace("VALUE = ", "VALUE = -")) if "gamma" in f else (f, t)
                    for f, t in changes
                ]
            parent = commit(f"refs/heads/pr-{b}", f"pr {b}: {' '.join(ops)} v{v}", parent, changes)
            chain.append(parent)
        chains[f"pr-{b}"] = chain
    marks = path / ".git" / "soak-marks"
    subprocess.run(
        ["git", "-C", str(path), "fast-import", "--quiet", f"--export-marks={marks}"],
        input="".join(stream).encode(),
        check=True,
    )
    sha = {int(m[1:]): s for m, s in (line.split() for line in marks.read_text().splitlines())}
    subprocess.run(["git", "-C", str(path), "checkout", "-q", "main"], check=True)
    return SoakRepo(
        name=name,
        path=path,
        base_sha=sha[base],
        versions={branch: [sha[m] for m in chain] for branch, chain in chains.items()},
    )


def write_workflows(directory: Path) -> Path:
    """The runners' (and the service's) workflow directory: one `cpu` backend."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cpu.yaml").write_text(WORKFLOW)
    return directory
