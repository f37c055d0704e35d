"""The headline tells the truth: the geometric mean and the slowest row rather than an
arithmetic mean that hides slow rows; a slowdown against the merge base is flagged next to
the accuracy verdict; interpreter timings are latencies, never `0.000x`; a running job shows
its progress; a cancel is no failure of the code."""

from __future__ import annotations

from datetime import timedelta

from report.checks import render_check, render_status
from report.comment import render_comment
from report.text import FASTER, SLOWER
from tests.service.test_report import T0, seed_result, seed_rows, view
from workflows.models import BenchmarkResult, Change, JobStatus, Progress


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


def _compared(factors: dict[int, tuple[float, float, float]], rounds: int = 8) -> list:  # type: ignore[type-arg]
    """The seed rows compared with a merge base: row i's change (ratio, low, high) where
    given, else a steady 1.0 (0.99-1.01)."""
    out = []
    for i, row in enumerate(seed_rows()):
        ratio, low, high = factors.get(i, (1.0, 0.99, 1.01))
        change = Change(rounds=rounds, ratio=ratio, low=low, high=high)
        out.append(
            row.model_copy(
                update={
                    "before_kernel_ms": row.kernel_ms / ratio,
                    "before_speedup": row.speedup * ratio,
                    "change": change,
                }
            )
        )
    return out


def test_rows_slower_than_the_merge_base_beyond_the_noise_are_flagged() -> None:
    # Row 0 is 2x slower (tight), row 1 25 % slower, row 2 5 % slower (within the threshold),
    # row 3 30 % slower but with an interval wider than the threshold: too noisy to judge.
    rows = _compared(
        {
            0: (2.0, 1.95, 2.05),
            1: (1.25, 1.2, 1.3),
            2: (1.05, 1.03, 1.07),
            3: (1.3, 0.9, 1.9),
        }
    )
    job = view(result=seed_result(benchmark=_bench(rows)))
    text = render_comment(job)
    headline = text.split("\n")[2]
    assert headline.startswith(f"### ✅ {SLOWER} ")
    assert "2 rows slower beyond noise" in headline
    assert "worst float16 \\[1, 1, 4, 4, 4\\]: \\+100.0 % ±2.5 %" in headline
    assert "1 of 12 rows too noisy to judge" in headline
    assert text.count(f"{SLOWER} |") == 2  # the two rows, marked in the table's change cell
    assert "| +5.0 % ±1.9 % | 8 |" in text  # within the threshold: not flagged
    assert "+30.0 % ±45.3 % 〰️ too noisy | 8 |" in text
    # The commit status carries it too, within GitHub's 140 characters.
    description = render_status(job).description
    assert len(description) <= 140 and "slower beyond noise" in description
    assert render_status(job).state == "success"  # gate: inform (the default)
    # --no-compare: nothing to compare with, nothing flagged.
    assert "slower" not in render_comment(view(compare=False, result=job.result))
    # A stricter threshold flags row 2 (+5 %) but finds rows 0 and 1 too noisy for it (bands
    # of ±2.5 % and ±4.1 %); a looser one only flags row 0.
    strict = render_comment(view(threshold=0.025, result=job.result)).split("\n")[2]
    assert "1 row slower" in strict and "3 of 12 rows too noisy" in strict
    assert "+5.0 % ±1.9 %" in strict
    assert "1 row slower" in render_comment(view(threshold=0.5, result=job.result))


def test_faster_rows_and_no_significant_change() -> None:
    rows = _compared({5: (0.8, 0.78, 0.82)})
    text = render_comment(view(result=seed_result(benchmark=_bench(rows))))
    headline = text.split("\n")[2]
    assert headline.startswith(f"### ✅ {FASTER} ") and "1 row faster" in headline
    assert SLOWER not in text
    steady = render_comment(view(result=seed_result(benchmark=_bench(_compared({})))))
    assert "no significant change" in steady.split("\n")[2]
    assert SLOWER not in steady and FASTER not in steady


def test_one_sample_a_side_is_never_judged() -> None:
    # An older job: one run of each side, no rounds. A 2x difference is not a verdict.
    rows = [
        r.model_copy(update={"before_kernel_ms": r.kernel_ms / 2, "before_speedup": 1.0})
        for r in seed_rows()
    ]
    text = render_comment(view(result=seed_result(benchmark=_bench(rows))))
    assert SLOWER not in text
    assert "12 of 12 rows too noisy to judge" in text.split("\n")[2]
    assert "+100.0 % ±? 〰️ too noisy | 1 |" in text


def test_a_failed_gate_fails_the_status_and_check_until_accepted() -> None:
    rows = _compared({0: (1.4, 1.35, 1.45)})
    result = seed_result(benchmark=_bench(rows))
    gated = view(gate="fail", result=result)
    assert render_status(gated).state == "failure"
    assert render_check(gated).conclusion == "failure"
    text = render_comment(gated)
    assert text.split("\n")[2].startswith(f"### ❌ {SLOWER} ")
    assert "regression gate failed" in text.split("\n")[2]
    assert "`/test accept-regression adaptive_max_pool3d_backward`" in text
    accepted = view(gate="fail", accepted_by="maint", result=result)
    assert render_status(accepted).state == "success"
    assert render_check(accepted).conclusion == "neutral"
    assert "accepted by @maint" in render_status(accepted).description
    # Nothing slower: the gate passes.
    steady = view(gate="fail", result=seed_result(benchmark=_bench(_compared({}))))
    assert render_status(steady).state == "success"
    assert render_check(steady).conclusion == "success"


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


def test_rows_short_of_the_rounds_an_interval_needs_say_the_budget_ran_out() -> None:
    # A workers comparison that stopped at five rounds: every interval open, every row noisy,
    # and the report says it was the comparison's time, not the code's noise.
    rows = [
        r.model_copy(update={"change": Change(rounds=5, ratio=1.0, low=None, high=None)})
        for r in _compared({})
    ]
    bench = _bench(rows).model_copy(update={"compare_mode": "workers"})
    text = render_comment(view(result=seed_result(benchmark=bench)))
    assert "12 of 12 rows too noisy to judge" in text.split("\n")[2]
    assert "12 rows had too few rounds (as few as 5) to bound their change at 95 %" in text
    assert "`compare.budget_s`" in text and "`compare.max_rounds`" in text
    # Rounds enough, a wide band: noisy for the code's noise, and nothing about the budget.
    wide = _bench(_compared({3: (1.3, 0.9, 1.9)})).model_copy(update={"compare_mode": "workers"})
    assert "too few rounds" not in render_comment(view(result=seed_result(benchmark=wide)))
    # An older job's single run a side says nothing of a budget either.
    assert "too few rounds" not in render_comment(
        view(
            result=seed_result(
                benchmark=_bench(
                    [
                        r.model_copy(update={"before_kernel_ms": r.kernel_ms / 2})
                        for r in seed_rows()
                    ]
                )
            )
        )
    )
