"""`python -m kernels.benchmark --baseline TREE`: another tree's kernels timed beside ours in
one process, round by round, under Triton's interpreter (the mechanics, not performance)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kernels.benchmark import baseline
from tests.kernels.support import bot_module, needs_bot

stats = bot_module("runner.job.kinds.benchmark.stats")
results = bot_module("runner.results.results")
bot = needs_bot(stats, results)

ROOT = Path(__file__).resolve().parents[2]
OP = "adaptive_max_pool3d_backward"
SLOWER_BASE = """

import time as _time

_exact = adaptive_max_pool3d_backward


def adaptive_max_pool3d_backward(grad_output, input, indices, *, config=None):  # noqa: F811
    _time.sleep(0.03)
    return _exact(grad_output, input, indices, config=config)
"""


def _tree(tmp_path: Path, slower: bool) -> Path:
    tree = tmp_path / ("slow" if slower else "same")
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "kernels", tree / "kernels", ignore=skip)
    if slower:
        module = tree / "kernels" / "ops" / OP / "__init__.py"
        module.write_text(module.read_text() + SLOWER_BASE)
    return tree


def _bench(
    tmp_path: Path, tree: Path, *extra: str, budget_s: float = 3
) -> subprocess.CompletedProcess[str]:
    """The harness against `tree`, its rounds within `budget_s` (the interpreter is busy
    throughout: a round's CPU is the budget's)."""
    return subprocess.run(
        [sys.executable, "-m", "kernels.benchmark", "--op", OP, "--dtypes", "float32",
         "--json", str(tmp_path / "out.json"), "--baseline", str(tree), "--budget-s",
         f"{budget_s:g}", "--no-progress", *extra],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


@bot
def test_a_slower_merge_base_is_measured_slower_round_by_round(tmp_path: Path) -> None:
    done = _bench(tmp_path, _tree(tmp_path, slower=True))
    assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "out.json").read_text())
    assert doc["compare_mode"] == "in_process"
    result = stats.judged(results.read_benchmark(tmp_path / "out.json"))
    assert len(result.rows) == 4
    for row in result.rows:
        assert row.kernel_samples_ms and row.before_kernel_samples_ms and row.reference_samples_ms
        rounds = len(row.kernel_samples_ms)
        assert rounds >= 6 and len(row.before_kernel_samples_ms) == rounds
        # The base sleeps 30 ms a call, so before is the slower side round by round. On a busy
        # CI host the interpreted kernel slows under contention and the sleep does not (every
        # gap of one run was 15-20 ms), and one side of a round can stall by more than the
        # sleep: the claim is a clear median gap and a majority, not every round.
        pairs = list(zip(row.kernel_samples_ms, row.before_kernel_samples_ms, strict=True))
        gaps = sorted(b - a for a, b in pairs)
        assert gaps[len(gaps) // 2] > 10, gaps
        assert sum(gap > 0 for gap in gaps) * 3 >= rounds * 2, gaps
        assert row.before_kernel_ms is not None and row.before_kernel_ms > row.kernel_ms
        assert row.change is not None and row.change.ratio < 1
        assert row.kernel_rounds is not None and row.kernel_rounds.rounds == rounds
    # The harness's own summary of a side agrees with the runner's.
    first = doc["rows"][0]["kernel_rounds"]
    assert first["median"] == pytest.approx(result.rows[0].kernel_rounds.median)


@bot
def test_the_same_tree_twice_is_no_change(tmp_path: Path) -> None:
    # No change to find: a shorter budget. A verdict's six rounds take 0.3 s here, and may
    # end by 2.25 s (1.5 x the budget): a machine 7 times slower still gives six.
    done = _bench(tmp_path, _tree(tmp_path, slower=False), budget_s=1.5)
    assert done.returncode == 0, done.stderr
    result = stats.judged(results.read_benchmark(tmp_path / "out.json"))
    changes = [row.change for row in result.rows if row.change is not None]
    assert len(changes) == 4 and all(c.rounds >= 6 and c.ratio > 0 for c in changes)


def test_a_missing_baseline_exits_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The command's own entry point, in this process: a child would import PyTorch and the
    # kernels (2.5 CPU-s) only to find the tree empty.
    from kernels.benchmark.__main__ import main

    empty = tmp_path / "empty"
    empty.mkdir()
    argv = ["--op", OP, "--dtypes", "float32", "--json", str(tmp_path / "out.json")]
    assert main([*argv, "--baseline", str(empty), "--no-progress"]) == 3
    assert "no kernels package" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()


def test_a_baseline_without_the_operator_is_refused(tmp_path: Path) -> None:
    package = baseline.load(_tree(tmp_path, slower=False), tmp_path / "scratch", "kernels_other")
    assert package.__name__ == "kernels_other"
    assert package.runtime.__name__ == "kernels_other.runtime"  # its own, not ours
    with pytest.raises(baseline.BaselineError, match="no_such_op"):
        baseline.function(package, "no_such_op", "active")


def _rounds_run(round_s: float, budget_s: float) -> int:
    """The rounds `time_rounds` runs on one row whose every timed call advances a fake clock
    so that a whole round (reference, before, after) takes `round_s`."""
    from kernels.benchmark.bandwidth import Split
    from kernels.benchmark.definition import Prepared
    from kernels.benchmark.rounds import Plan, Samples, Switch, time_rounds

    now = [0.0]

    def timer(fn: Any) -> float:
        fn()
        now[0] += round_s / 3
        return 1.0 + 0.01 * (len(samples.after) % 7)  # never settles: only the clock stops it

    noop = lambda: None  # noqa: E731
    prepared = Prepared(reference=noop, kernel=noop, verify=noop, split=Split(8, 8))
    samples = Samples()
    plan = Plan(budget_s=budget_s, target=1e-9)
    return time_rounds([(prepared, Switch(noop, noop))], [samples], timer, plan, lambda: now[0])


def test_the_rounds_a_verdict_needs_may_run_past_the_budget_but_no_further() -> None:
    """A round of 4.5 s in a 20 s budget: 4 rounds fit, and the 6 a verdict needs end at
    27 s, within 1.5 x the budget, so 6 run; past 6 the budget holds. A round of 6 s: 6
    would end at 36 s, past 30, so the rounds stop at the budget (3)."""
    from kernels.benchmark.rounds import MIN_ROUNDS

    assert _rounds_run(4.5, 20) == MIN_ROUNDS
    assert _rounds_run(6.0, 20) == 3
    assert _rounds_run(1.0, 20) == 20  # well within: the budget alone decides
