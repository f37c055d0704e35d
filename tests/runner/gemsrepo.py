"""A small FlagGems-style repository, written by code, in two commits: `src/flag_gems` with
absolute imports, an op registry, a `use_gems()` context and one Triton kernel (run under
the interpreter on the CPU), and a `benchmark/` whose conftest writes `[INFO] {json}` record
lines through a logger opened once a session, and whose `Benchmark.run()` times each row
with `triton.testing.do_bench` twice (the reference first, then the op under `use_gems`).

Both kernels sleep on the host for a small input, the pull request's twice as long (so that
row is slower, by a ratio the interpreter's noise cannot blur). Larger inputs take a cheap op
(no kernel) that sleeps on every fourth call: the large one's twice as long in the pull
request (its host time per call, above its median single call, got slower alone, as a
wrapper's added Python does on a GPU), the middle one's alike in both (a host-bound row that
did not change: an A/A row of host time)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

OP = "scale"
SMALL, MIDDLE, LARGE = [64], [1024], [4096]
SLEEP_BASE_S, SLEEP_EVERY_CALL_S = 0.030, 0.100  # a small input's sleep: merge base, PR
# The larger rows call a cheap op behind a sleep of SLEEP_CALL_S (so the timer's host reading
# is four calls, one of them the fourth) and a longer one every fourth call: the large row's
# merge base and PR, a host time per call of about 10 and 40 ms over a device time (the median
# call) of 5 ms; a loaded CPU's late wake-ups (a few ms) stay well inside the threshold.
SLEEP_CALL_S = 0.005
SLEEP_BASE_FOURTH_S, SLEEP_EVERY_FOURTH_S = 0.020, 0.140
SLEEP_MIDDLE_S = 0.020  # the middle row's, every fourth call, in both trees

INIT = '''\
"""A FlagGems-like library: ops by name, used inside `use_gems()`."""
import contextlib

from flag_gems.ops.scale import scale

REGISTRY = {"scale": scale}
_active: list[dict] = []


@contextlib.contextmanager
def use_gems(exclude=()):
    _active.append({k: v for k, v in REGISTRY.items() if k not in exclude})
    try:
        yield
    finally:
        _active.pop()


def lookup(name, default):
    return _active[-1].get(name, default) if _active else default
'''

KERNEL = '''\
"""Twice its input: by a Triton kernel, or past 64 elements a cheap op behind host work."""
import time

import torch
import triton
import triton.language as tl

SLEEP_EVERY_CALL_S = {every}
SLEEP_EVERY_FOURTH_S = {fourth}
SLEEP_MIDDLE_S = {middle}
SLEEP_CALL_S = {call}
_calls = [0]


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2, mask=mask)


def scale(x):
    _calls[0] += 1
    if x.numel() > 64:
        # A wrapper's host work around a cheap op: a sleep every fourth call, which the
        # median call (the device time without a device) never holds and the host time per
        # call averages in.
        time.sleep(SLEEP_CALL_S)
        if _calls[0] % 4 == 0:
            time.sleep(SLEEP_MIDDLE_S if x.numel() <= 1024 else SLEEP_EVERY_FOURTH_S)
        return x * 2
    time.sleep(SLEEP_EVERY_CALL_S)
    out = torch.empty_like(x)
    n = x.numel()
    block = min(triton.next_power_of_2(n), 4096)
    _scale_kernel[(triton.cdiv(n, block),)](x, out, n, BLOCK=block)
    return out
'''

CONFTEST = """\
import logging

record = logging.getLogger("gems_benchmark_records")
record.propagate = False


def pytest_addoption(parser):
    parser.addoption("--level", default="comprehensive")
    parser.addoption("--record", default="none")


def pytest_configure(config):
    if config.getoption("--record") == "log":
        handler = logging.FileHandler("result_test_scale--level_core--record_log.log", mode="w")
        handler.setFormatter(logging.Formatter("[%(levelname)s] %(message)s"))
        record.addHandler(handler)
        record.setLevel(logging.INFO)
"""

BENCHMARK = """\
import json

import torch
import triton

import flag_gems
from conftest import record

SHAPES = {shapes}


class Benchmark:
    def __init__(self, op_name, torch_op):
        self.op_name, self.torch_op = op_name, torch_op

    def get_latency(self, op, *args):
        fn = lambda: op(*args)
        do_bench = triton.testing.do_bench  # looked up at call time, as FlagGems does
        return do_bench(fn, warmup=25, rep=100, return_mode="median", grad_to_none=None)

    def run(self):
        for dtype in (torch.float32,):
            result = []
            for shape in SHAPES:
                x = torch.randn(shape, dtype=dtype)
                base = self.get_latency(self.torch_op, x)
                with flag_gems.use_gems(exclude=["zero_"]):
                    gems_op = flag_gems.lookup(self.op_name, self.torch_op)
                    latency = self.get_latency(gems_op, x)
                result.append({{"shape_detail": [list(shape)], "latency_base": base,
                               "latency": latency, "speedup": base / latency}})
            record.info(json.dumps({{"op_name": self.op_name, "dtype": str(dtype),
                                    "mode": "kernel", "level": "core", "result": result}}))
"""

BENCH_TEST = """\
import pytest
import torch

from performance_utils import Benchmark


@pytest.mark.scale
def test_scale_perf():
    Benchmark("scale", lambda x: torch.mul(x, 2)).run()
"""

ACCURACY = """\
import pytest


@pytest.mark.scale
def test_scale():
    assert 2 * 3 == 6
"""


@dataclass(frozen=True)
class GemsRepo:
    path: Path
    base_sha: str  # `main`: the kernel with the smaller host cost
    head_sha: str  # `pr`: the kernel that sleeps longer on the host


def _git(repo: Path, *args: str) -> str:
    cmd = ["git", "-c", "user.name=t", "-c", "user.email=t@e", "-c", "commit.gpgsign=false"]
    return subprocess.run(
        [*cmd, *args], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()


def _write_kernel(repo: Path, every: float, fourth: float) -> None:
    path = repo / "src" / "flag_gems" / "ops" / "scale.py"
    path.write_text(
        KERNEL.format(every=every, fourth=fourth, middle=SLEEP_MIDDLE_S, call=SLEEP_CALL_S)
    )


def make_gems_repo(path: Path, new_op: bool = False) -> GemsRepo:
    """The repository: `main` at the merge base, `pr` one commit ahead with the slow kernel
    (with `new_op`, the merge base has no benchmark of the operator: the pull request adds
    it)."""
    (path / "src" / "flag_gems" / "ops").mkdir(parents=True)
    (path / "tests").mkdir()
    (path / "benchmark").mkdir()
    (path / "pytest.ini").write_text(
        f"[pytest]\npythonpath = src benchmark\nmarkers =\n    {OP}: the {OP} operator\n"
    )
    (path / "src" / "flag_gems" / "__init__.py").write_text(INIT)
    (path / "src" / "flag_gems" / "ops" / "__init__.py").write_text("")
    _write_kernel(path, SLEEP_BASE_S, SLEEP_BASE_FOURTH_S)
    (path / "tests" / "test_scale.py").write_text(ACCURACY)
    (path / "benchmark" / "conftest.py").write_text(CONFTEST)
    (path / "benchmark" / "performance_utils.py").write_text(
        BENCHMARK.format(shapes=[SMALL, MIDDLE, LARGE])
    )
    if not new_op:
        (path / "benchmark" / f"test_{OP}.py").write_text(BENCH_TEST)
    _git(path, "init", "-q", "-b", "main")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "base")
    base = _git(path, "rev-parse", "HEAD")
    _git(path, "checkout", "-q", "-b", "pr")
    _write_kernel(path, SLEEP_EVERY_CALL_S, SLEEP_EVERY_FOURTH_S)
    (path / "benchmark" / f"test_{OP}.py").write_text(BENCH_TEST)
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "a kernel with a host cost")
    head = _git(path, "rev-parse", "HEAD")
    _git(path, "checkout", "-q", "main")
    return GemsRepo(path, base, head)
