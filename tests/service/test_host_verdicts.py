"""A host-bound row's host time judged with processes as samples: the interval of its change
over several processes per tree (`runner.job.kinds.benchmark.stats.process_change`), its
verdict beside the device's (`service.render.verdicts`), and what the report and the gate
make of it; an older result's one-process host change stays shown, never judged."""

from __future__ import annotations

import math

import numpy as np
import pytest

from report import table as table_module
from report.checks import render_check, render_status
from report.comment import render_comment
from report.text import SLOWER
from report.verdicts import Verdict, detectable, host_judged, judge, judged_rows
from runner.job.kinds.benchmark import stats
from tests.service.test_render_headline import _bench, _compared
from tests.service.test_report import seed_result, view
from workflows.models import BenchmarkResult, BenchmarkRow, Change

THRESHOLD = 0.10


def test_the_host_change_over_processes_is_a_t_interval_on_their_logs() -> None:
    """The ratio of the sides' geometric means, with a Welch t-interval on the logs of each
    process's median; open with one process a side, a point where the processes agree
    exactly, None without a positive value a side."""
    after, before = [121.0, 118.0, 125.0], [100.0, 98.0, 103.0]
    found = stats.process_change(before, after)
    assert found is not None and found.rounds == 3
    a, b = np.log(after), np.log(before)
    assert found.ratio == pytest.approx(math.exp(a.mean() - b.mean()))
    se = math.sqrt(a.var(ddof=1) / 3 + b.var(ddof=1) / 3)
    assert found.low is not None and found.high is not None
    half = math.log(found.high / found.ratio)
    assert half == pytest.approx(math.log(found.ratio / found.low))  # symmetric on logs
    assert 2.7 * se < half < 4.4 * se  # a t quantile of two to four degrees of freedom
    assert judge(found, THRESHOLD) is Verdict.slower  # +21 %, ±4 %: beyond +10 %
    one = stats.process_change([100.0], [121.0, 118.0])
    assert one is not None and one.low is None and judge(one, THRESHOLD) is Verdict.noisy
    same = stats.process_change([50.0, 50.0], [60.0, 60.0])
    assert same is not None and same.low == same.high == pytest.approx(1.2)
    assert stats.process_change([0.0], [1.0]) is None


def _job(rng: np.random.Generator, spread: float, ratio: float = 1.0) -> list[Verdict]:
    """One job's 9 host-bound rows, three processes a tree whose host times differ between
    processes by `spread` (log-normal: a process's state multiplies every call), the pull
    request's `ratio` times the merge base's: each row's host verdict, through `judged`."""
    rows = [
        BenchmarkRow(
            dtype="float16",
            size=[i],
            reference_ms=1.0,
            kernel_ms=1.0,
            speedup=1.0,
            kernel_host_process_us=np.exp(rng.normal(math.log(ratio), spread, 3)).tolist(),
            before_kernel_host_process_us=np.exp(rng.normal(0.0, spread, 3)).tolist(),
        )
        for i in range(9)
    ]
    judged = stats.judged(BenchmarkResult(op="op", rows=rows))
    return [judge(row.host_process_change, THRESHOLD) for row in judged.rows]  # type: ignore[arg-type]


@pytest.mark.parametrize("spread", [0.02, 0.05, 0.1, 0.3])
def test_comment_only_pull_requests_do_not_flag_their_host_rows(spread: float) -> None:
    """A/A: three comment-only pull requests of 9 host-bound rows each, 100 times over, flag
    no row at any spread between processes; where the processes spread about as wide as the
    threshold or wider, the rows are too noisy, not flagged. (Without the job's floor on a
    row's spread, one row in a thousand was flagged at a spread of 10 %: three processes
    that agree by chance.)"""
    rng = np.random.default_rng(7)
    verdicts = [v for _ in range(100 * 3) for v in _job(rng, spread)]
    assert not [v for v in verdicts if v in (Verdict.slower, Verdict.faster)]
    if spread >= 0.1:
        assert all(v is Verdict.noisy for v in verdicts)


def test_a_rows_spread_is_at_least_the_jobs() -> None:
    """`spread_floor` is the median of the rows' variances of one process's log host time:
    a row whose three processes agree exactly is judged with the job's spread, not none."""
    spread = [[100.0, 110.0, 90.0], [100.0, 100.0, 100.0]]
    rows = [
        BenchmarkRow(
            dtype="float16",
            size=[i],
            reference_ms=1.0,
            kernel_ms=1.0,
            speedup=1.0,
            kernel_host_process_us=[v * 1.3 for v in spread[i % 2]],
            before_kernel_host_process_us=spread[i % 2],
        )
        for i in range(3)
    ]
    floor = stats.spread_floor(rows)
    assert floor == pytest.approx(float(np.var(np.log(spread[0]), ddof=1)))
    agreeing = stats.judged(BenchmarkResult(op="op", rows=rows)).rows[1].host_process_change
    alone = stats.process_change(spread[1], [v * 1.3 for v in spread[1]])
    assert agreeing is not None and alone is not None and alone.low == alone.high
    assert agreeing.low is not None and agreeing.low < 1.3 * 0.9


def test_a_host_slowdown_is_flagged_where_the_processes_agree() -> None:
    """+20 % of host time (30 µs on a 150 µs call) with processes that differ by 2 %: three
    processes a tree flag it about nine times in ten (at 3 %, six in ten; at 5 %, the rows
    are mostly too noisy: more processes, `compare.host_processes`, are the way there)."""
    rng = np.random.default_rng(11)
    verdicts = [v for _ in range(60) for v in _job(rng, 0.02, ratio=1.2)]
    assert sum(v is Verdict.slower for v in verdicts) / len(verdicts) >= 0.85


def _host_bound(rows: list[BenchmarkRow], index: int, host: Change, **more: object) -> None:
    """Make row `index` host-bound (host time per call 40 × its device time) with `host` its
    host change over processes."""
    row = rows[index]
    rows[index] = row.model_copy(
        update={
            "kernel_host_us": row.kernel_ms * 1000 * 40,
            "before_kernel_host_us": row.kernel_ms * 1000 * 40 / host.ratio,
            "host_process_change": host,
            "kernel_host_process_us": [1.0, 1.0, 1.0],
            "before_kernel_host_process_us": [1.0, 1.0, 1.0],
            **more,
        }
    )


def test_a_host_slower_row_is_flagged_on_its_host_time_and_fails_the_gate() -> None:
    """A host-bound row whose host change over processes lies wholly beyond the threshold is
    slower, on its host time alone (its device time steady): the headline names the host
    change, the table marks it beside the device's, the note says which rows were judged on
    host time, how and what each could detect, and `gate: fail` fails the status and check."""
    rows = _compared({})
    _host_bound(rows, 2, Change(rounds=3, ratio=1.21, low=1.16, high=1.26))
    _host_bound(rows, 4, Change(rounds=3, ratio=1.01, low=0.97, high=1.05))
    bench = _bench(rows)
    judged = judged_rows(bench, THRESHOLD)
    assert [j.row for j in host_judged(judged)] == [rows[2], rows[4]]
    slow = judged[2]
    assert slow.device_verdict is Verdict.same and slow.host_verdict is Verdict.slower
    assert slow.verdict is Verdict.slower and slow.on_host and slow.deciding is slow.host_change
    assert judged[4].verdict is Verdict.same and not judged[4].on_host

    gated = view(gate="fail", result=seed_result(benchmark=bench))
    text = render_comment(gated)
    headline = text.split("\n")[2]
    assert headline.startswith(f"### ❌ {SLOWER} ") and "1 row slower beyond noise" in headline
    assert ": host \\+21.0 % ±4.2 %\\)" in headline  # Markdown-escaped
    assert render_status(gated).state == "failure"
    assert render_check(gated).conclusion == "failure"
    cell = table_module._change_cell(slow)
    assert cell == f"device +0.0 % ±1.0 % · host +21.0 % ±4.2 % {SLOWER}"
    (note,) = [line for line in text.split("\n") if line.startswith("**Host time:**")]
    assert "2 host-bound rows" in note and "timed in 3 processes per tree" in note
    assert "1 flagged on host time" in note
    low = detectable(Change(rounds=3, ratio=1.01, low=0.97, high=1.05), THRESHOLD)
    high = detectable(Change(rounds=3, ratio=1.21, low=1.16, high=1.26), THRESHOLD)
    assert low is not None and high is not None
    assert f"+{low * 100:.1f} % to +{high * 100:.1f} %" in note
    (bound,) = [line for line in text.split("\n") if line.startswith("Host-bound rows")]
    assert "both are judged" in bound and "only the device's" not in bound
    # Nothing slower on either: the gate passes.
    rows = _compared({})
    _host_bound(rows, 2, Change(rounds=3, ratio=1.03, low=0.99, high=1.07))
    steady = view(gate="fail", result=seed_result(benchmark=_bench(rows)))
    assert render_status(steady).state == "success"
    assert "no significant change" in render_comment(steady).split("\n")[2]


def test_a_host_change_whose_processes_disagree_is_too_noisy_and_never_flagged() -> None:
    """A host change over processes whose band is wider than the threshold is "host too
    noisy": never flagged however far its ratio, the row's verdict its device's; a device
    slowdown still flags the row."""
    rows = _compared({5: (1.5, 1.45, 1.55)})
    _host_bound(rows, 2, Change(rounds=3, ratio=1.6, low=1.15, high=2.3))
    _host_bound(rows, 5, Change(rounds=3, ratio=0.95, low=0.6, high=1.5))
    bench = _bench(rows)
    judged = judged_rows(bench, THRESHOLD)
    assert judged[2].host_verdict is Verdict.noisy and judged[2].verdict is Verdict.same
    assert judged[5].host_verdict is Verdict.noisy and judged[5].verdict is Verdict.slower
    assert not judged[5].on_host
    cell = table_module._change_cell(judged[2])
    assert cell.endswith("〰️ host too noisy") and SLOWER not in cell
    text = render_comment(view(gate="fail", result=seed_result(benchmark=bench)))
    headline = text.split("\n")[2]  # Markdown-escaped: the device's change gave it
    assert "1 row slower beyond noise \\(worst float32 \\[2, 3, 8, 8, 8\\]: \\+50.0 %" in headline
    (note,) = [line for line in text.split("\n") if line.startswith("**Host time:**")]
    assert "2 host too noisy to judge" in note and "flagged on host time" not in note


def test_a_device_bound_row_and_an_older_result_are_not_judged_on_host_time() -> None:
    """A row that is not host-bound is judged on its device time whatever its host change;
    an older result (one process a side: a host change paired by round, no processes) shows
    its host change and judges the device's alone, as before."""
    rows = _compared({})
    rows[0] = rows[0].model_copy(
        update={"host_process_change": Change(rounds=3, ratio=1.5, low=1.45, high=1.55)}
    )
    older = rows[1].model_copy(
        update={
            "kernel_host_us": rows[1].kernel_ms * 1000 * 40,
            "before_kernel_host_us": rows[1].kernel_ms * 1000 * 30,
            "host_change": Change(rounds=8, ratio=1.33, low=1.3, high=1.36),
        }
    )
    rows[1] = older
    bench = _bench(rows)
    judged = judged_rows(bench, THRESHOLD)
    assert judged[0].host_change is None and judged[0].verdict is Verdict.same
    assert judged[1].host_change is not None and judged[1].host_verdict is None
    assert judged[1].verdict is Verdict.same and not host_judged(judged)
    text = render_comment(view(gate="fail", result=seed_result(benchmark=bench)))
    assert "**Host time:**" not in text and SLOWER not in text
    (bound,) = [line for line in text.split("\n") if line.startswith("Host-bound rows")]
    assert "only the device's is judged" in bound
