"""The headline tells the truth: the geometric mean and the slowest row rather than an
arithmetic mean that hides slow rows; a slowdown against the merge base is flagged next to
the accuracy verdict; interpreter timings are latencies, never `0.000x`; a running job shows
its progress; a cancel is no failure of the code."""

from __future__ import annotations

from datetime import timedelta

from service.render.comment import SLOWER, render_comment, render_status
from tests.service.test_report import T0, seed_result, seed_rows, view
from workflows.models import BenchmarkResult, JobStatus, Progress


def _bench(rows: list, **changes: object) -> BenchmarkResult:  # type: ignore[type-arg]
    arith, geo = BenchmarkResult.means([r.speedup for r in rows])
    return BenchmarkResult(
        op="x", rows=rows, arithmetic_mean_speedup=arith, geometric_mean_speedup=geo, **changes
    )


def test_a_few_fast_rows_do_not_hide_slow_ones() -> None:
    # The arithmetic mean is above one; the geometric mean, and the slowest row, are not.
    rows = seed_rows()[:4]
    speedups = [3.5, 0.09, 0.5, 0.6]
    rows = [r.model_copy(update={"speedup": s}) for r, s in zip(rows, speedups, strict=True)]
    bench = _bench(rows)
    assert bench.arithmetic_mean_speedup and bench.arithmetic_mean_speedup > 1
    text = render_comment(view(result=seed_result(benchmark=bench)))
    headline = text.split("\n")[2]
    assert headline.startswith(f"### ✅ {SLOWER} ")  # accuracy passed; performance did not
    assert "geomean 0.55x" in headline and "slowest 0.09x" in headline
    assert "mean speedup" not in headline
    assert "Arithmetic mean speedup: 1.17x" in text  # the footer keeps it
    assert "0.55x" in render_status(view(result=seed_result(benchmark=bench))).description


def test_rows_slower_than_the_merge_base_beyond_the_noise_are_flagged() -> None:
    rows = seed_rows()
    changed = []
    for i, row in enumerate(rows):
        # Row 0 got 2x slower, row 1 1.5x slower, row 2 5% slower (noise), the rest faster.
        factor = {0: 2.0, 1: 1.5, 2: 1.05}.get(i, 0.5)
        changed.append(
            row.model_copy(
                update={
                    "before_kernel_ms": row.kernel_ms / factor,
                    "before_speedup": row.speedup * factor,
                }
            )
        )
    bench = _bench(changed)
    job = view(result=seed_result(benchmark=bench))
    text = render_comment(job)
    headline = text.split("\n")[2]
    assert headline.startswith(f"### ✅ {SLOWER} ")
    assert "2 rows slower than before" in headline
    assert "worst float16 \\[1, 1, 4, 4, 4\\]: 0.0022 → 0.0044 ms" in headline
    assert "2 rows slower than on the merge base" in text
    assert text.count(f"x {SLOWER} |") == 2  # the two rows, marked in the table
    # The commit status carries it too, within GitHub's 140 characters.
    description = render_status(job).description
    assert len(description) <= 140 and "slower than before" in description
    # --no-compare: nothing to compare with, nothing flagged.
    assert "slower than" not in render_comment(view(compare=False, result=job.result))


def test_no_slowdown_no_flag() -> None:
    rows = [
        r.model_copy(update={"before_kernel_ms": r.kernel_ms * 1.05, "before_speedup": 1.0})
        for r in seed_rows()
    ]
    text = render_comment(view(result=seed_result(benchmark=_bench(rows))))
    assert SLOWER not in text


def test_interpreter_runs_show_latencies_without_speedups() -> None:
    rows = [r.model_copy(update={"speedup": 0.0004}) for r in seed_rows()]
    bench = _bench(rows, performance=False)
    job = view(backend="cpu", result=seed_result(benchmark=bench))
    text = render_comment(job)
    assert "0.000x" not in text and "0.00x" not in text
    assert "| dtype | Size | Torch Latency (ms) | Kernel Latency (ms) |" in text
    assert "| float16 | 1, 1, 4, 4, 4 | 0.008640 | 0.004440 |" in text
    assert "latencies only" in text.split("\n")[2]
    assert SLOWER not in text  # no performance claim either way
    assert render_status(job).description.endswith("latencies only (Triton interpreter)")


def test_a_running_job_shows_step_tests_failures_elapsed_and_estimate() -> None:
    progress = Progress(
        step="accuracy",
        tests_done=12,
        tests_total=411,
        failed=2,
        failures=["tests/test_pool.py::test_a[f16]", "tests/test_pool.py::test_b"],
    )
    job = view(
        JobStatus.running,
        finished_at=None,
        progress=progress,
        estimate_s=300.0,
        now=T0 + timedelta(seconds=95),
    )
    text = render_comment(job)
    headline = text.split("\n")[2]
    assert headline.endswith("running on musa-01: accuracy, 12/411 tests, 2 failed")
    assert "**12/411 tests**, 2 failed so far" in text
    assert "running for 1m 35s · usually takes 5m 00s" in text
    assert "- `tests/test_pool.py::test_a[f16]`" in text
    assert render_status(job).description == "running on musa-01: accuracy, 12/411 tests, 2 failed"
    # Before any progress came: no counts, still the elapsed time.
    quiet = render_comment(view(JobStatus.running, finished_at=None, now=T0))
    assert "running for 0.0s" in quiet and "tests" not in quiet.split("\n")[2]


def test_a_cancel_says_why_and_is_not_a_failure_of_the_code() -> None:
    cancelled = seed_result(
        status=JobStatus.cancelled, error_message="runner stopped (SIGTERM)", benchmark=None
    )
    job = view(JobStatus.cancelled, result=cancelled, reason=None)
    assert render_comment(job).split("\n")[2].endswith("runner stopped \\(SIGTERM\\)")
    status = render_status(job)
    assert status.state == "pending" and status.description == "runner stopped (SIGTERM)"
