"""`/test profile`'s runner parts on the CPU: the choice of rows, the trace parser, and the
profiling shim run as a job runs it (a harness in a subprocess whose timer it wraps), its
row's real `torch.profiler` trace exported and read back by the parser."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from runner.job.kinds.benchmark import profiling, traces
from runner.plugins import PLUGINS
from workflows.models import BenchmarkResult, BenchmarkRow, Change

pytest.importorskip("torch")


def test_device_events_are_the_kernels_where_there_are_any() -> None:
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ondemand.call:add", "ts": 0, "dur": 50},
        {"ph": "X", "cat": "user_annotation", "name": "ondemand.call:add", "ts": 100, "dur": 70},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 1, "dur": 40},
        {"ph": "X", "cat": "kernel", "name": "add_kernel", "ts": 10, "dur": 8},
        {"ph": "X", "cat": "kernel", "name": "add_kernel", "ts": 110, "dur": 12},
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD", "ts": 120, "dur": 4},
        {"ph": "i", "cat": "kernel", "name": "instant", "ts": 5},
    ]
    read = traces.parse(json.dumps({"traceEvents": events}))
    assert read.device and read.calls == 2 and read.host_us == 60.0
    assert [(k.name, k.us, k.calls) for k in read.kernels] == [
        ("add_kernel", 10.0, 1.0),
        ("Memcpy HtoD", 2.0, 0.5),
    ]


@pytest.mark.parametrize("text", ["not json", "{}", '{"traceEvents": 3}'])
def test_what_is_not_a_trace_is_refused(text: str) -> None:
    with pytest.raises(traces.TraceError):
        traces.parse(text)


def _row(
    kernel_ms: float, ratio: float | None, low: float = 0.0, high: float = 0.0
) -> BenchmarkRow:
    change = None if ratio is None else Change(rounds=8, ratio=ratio, low=low, high=high)
    return BenchmarkRow(
        dtype="float32", size=[1], reference_ms=1, kernel_ms=kernel_ms, speedup=1, change=change
    )


def test_the_rows_that_changed_most_are_chosen_else_the_slowest() -> None:
    rows = [
        _row(1.0, 1.02, 0.99, 1.05),  # within noise: not changed
        _row(2.0, 1.5, 1.4, 1.6),
        _row(3.0, 0.5, 0.45, 0.55),  # twice as fast: |log| the largest
        _row(4.0, 1.2, 1.15, 1.25),
        _row(5.0, 1.1, 1.05, 1.15),
    ]
    assert profiling.chosen(BenchmarkResult(op="x", rows=rows)) == [2, 1, 3]
    unchanged = [_row(1.0, None), _row(3.0, 1.0, 0.9, 1.1), _row(2.0, None), _row(0.5, None)]
    assert profiling.chosen(BenchmarkResult(op="x", rows=unchanged)) == [1, 2, 0]


HARNESS = """\
import torch
from timing import timed

x = torch.randn(64)
for row in range(3):
    timed(lambda: x + 1)               # the reference
    timed(lambda: torch.mul(x, row))   # the kernel
print("done")
"""


def test_the_shim_profiles_the_chosen_rows_kernels_and_leaves_the_harness_alone(
    tmp_path: Path,
) -> None:
    tree, out = tmp_path / "tree", tmp_path / "out"
    tree.mkdir()
    out.mkdir()
    (tree / "timing.py").write_text(
        textwrap.dedent("""\
            def timed(fn):
                fn()
                return 1.0
            """)
    )
    (tree / "harness.py").write_text(HARNESS)
    env = {
        **os.environ,
        "PYTHONPATH": str(PLUGINS),
        "BENCH_PROFILE_DIR": str(out),
        "BENCH_PROFILE_ROWS": "1",
        "BENCH_PROFILE_TIMERS": "timing:timed,absent.module:timer",
        "BENCH_PROFILE_ACTIVITIES": "cpu",
        "BENCH_PROFILE_OP": "mul",
        "BENCH_PROFILE_CALLS": "4",
    }
    done = subprocess.run(
        [sys.executable, "-m", profiling.SHIM, "harness.py"],
        cwd=tree, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "done" in done.stdout  # the harness ran to its end
    assert sorted(p.name for p in out.iterdir()) == ["row-1.json"]
    read = traces.parse((out / "row-1.json").read_text())
    # The parser over the real trace torch.profiler wrote: four calls, no device, so the op
    # itself stands first (its median call), then the host ops it ran, once a call each.
    assert "traceEvents" in json.loads((out / "row-1.json").read_text())
    assert read.calls == 4 and not read.device
    assert read.host_us is not None and read.host_us > 0
    names = [k.name for k in read.kernels]
    assert names[0] == "mul" and read.kernels[0].us == read.host_us
    assert "aten::mul" in names and "aten::add" not in names  # the kernel's, not the reference's
    mul = next(k for k in read.kernels if k.name == "aten::mul")
    assert mul.calls == 1.0 and mul.us > 0
