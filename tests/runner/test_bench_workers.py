"""Before → after in a worker per tree (runner/job/kinds/benchmark/bench_workers.py with
the pytest plugin runner/plugins/pytest_bench_rounds.py): a FlagGems-style repository
compared through `execute()`, its workers kept across rounds; and the protocol held against a
worker that never answers or answers what cannot be read."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

import pytest

from report.checks import render_status
from report.comment import render_comment
from report.text import SLOWER
from report.verdicts import Verdict, judged_rows
from runner.job.execute import execute
from runner.job.kinds.benchmark import bench_workers
from runner.local import job_view
from tests.runner.gemsrepo import (
    LARGE,
    MIDDLE,
    OP,
    SLEEP_EVERY_CALL_S,
    SMALL,
    GemsRepo,
    make_gems_repo,
)
from tests.runner.jobs import job_context
from workflows.models import JobResult, JobSpec, JobStatus
from workflows.repo_config import ComparePolicy
from workflows.spec import WorkflowSpec, load_workflows

# A repository's threshold wide enough for a loaded CPU's noise: the slowed row's sleep
# more than triples (about +200 % with the kernel's own time; when it only doubled, a loaded
# CI machine's rounds read +86 % with the interval's low end at +42 %, under the threshold); the
# host-bound row's host time is judged over three processes a tree (a t-interval on two
# degrees of freedom), whose band a loaded machine has widened to ±40 %: its pull request
# quadruples that row's host time so the change stays far beyond such a band.
THRESHOLD = 0.45
MAX_ROUNDS = 9  # the fewest whose median's 95 % interval leaves out each side's extreme


def _workflow(
    max_rounds: int, timer_ms: int, benchmark_only: bool = False, host_processes: int = 1
) -> WorkflowSpec:
    """The cpu workflow's FlagGems-style layout (it compares in workers) with `max_rounds`,
    the processes per tree that time host time and the rounds timer's budget; only its
    benchmark step with `benchmark_only`."""
    workflow = load_workflows()["cpu"]
    compare = {"max_rounds": max_rounds, "host_processes": host_processes, "host_budget_s": 120}
    steps = [
        s.model_copy(update={"compare": s.compare.model_copy(update=compare)})
        for s in workflow.layouts["flaggems"]
        if not benchmark_only or s.kind == "benchmark"
    ]
    assert all(s.compare.workers for s in steps if s.kind == "benchmark")
    # The repository's harness loads the plugins it names (and the runner's), not those of
    # the bot's test environment it shares (xdist, hypothesis, ...): each worker and host
    # process would import them for nothing, a quarter of a second each.
    env = {"BENCH_ROUNDS_TIMER_MS": str(timer_ms), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return workflow.model_copy(
        update={"layouts": {"flaggems": steps}, "env": {**workflow.env, **env}}
    )


def _compare(
    tmp_path: Path, workflow: WorkflowSpec, new_op: bool = False
) -> tuple[GemsRepo, JobSpec, JobResult, str]:
    """A FlagGems-style repository's pull request compared with its merge base through
    `execute()`: the repository, the job, its result and its log."""
    repo = make_gems_repo(tmp_path / "FlagGems", new_op=new_op)
    spec = JobSpec(
        id=9, repo="o/FlagGems", clone_url=str(repo.path), pr_number=1, sha=repo.head_sha,
        op=OP, backend="cpu", base_sha=repo.base_sha,
    )  # fmt: skip
    log = bytearray()
    result = execute(spec, workflow, job_context(tmp_path, log.extend))
    return repo, spec, result, log.decode()


def test_a_flaggems_style_comparison_in_a_worker_per_tree(tmp_path: Path) -> None:
    """Each tree's benchmark process serves every round (one pid per tree), each row is
    compared over at least six rounds with host times per call, the row whose kernel sleeps
    on every call is judged slower; the host-bound rows' host time is timed in three
    processes per tree (the worker and two more, one round each), so the row whose pull
    request's kernel alone sleeps on every fourth call is flagged slower on its host time
    (its device time, the median call, unchanged), the gate fails on it too, and the row whose
    kernels sleep alike in both trees (an A/A row of host time) is flagged on nothing."""
    # A 4 ms timer: a host reading of the larger rows is four calls (one sleeps longer).
    workflow = _workflow(MAX_ROUNDS, timer_ms=4, benchmark_only=True, host_processes=3)
    repo, spec, result, text = _compare(tmp_path, workflow)  # accuracy: test_layouts
    assert result.status is JobStatus.succeeded, text
    bench = result.benchmark
    assert bench is not None and bench.compare_mode == "workers", text
    assert bench.merge_base == repo.base_sha
    (step,) = [s for s in result.steps if s.name == "benchmark (merge base)"]
    assert "a worker per tree" in (step.message or ""), step
    assert "host time in 3 and 3 processes per tree" in (step.message or ""), step

    # One process per tree answered every round; each further host process one round.
    artifacts = tmp_path / "job" / "artifacts"
    pids: set[int] = set()
    for side in ("after", "base", "after-2", "base-2", "after-3", "base-3"):
        answers = [
            json.loads(p.read_text()) for p in artifacts.glob(f"bench-rounds-{side}/round-*.json")
        ]
        assert len(answers) == 1 if "-" in side else len(answers) >= 6, side
        assert len({a["pid"] for a in answers}) == 1, answers
        assert all(len(a["timings"]) == 6 for a in answers)  # three rows, two readings each
        pids.add(answers[0]["pid"])
    assert len(pids) == 6  # six processes

    small, middle, large = bench.rows
    assert (small.size, middle.size, large.size) == (SMALL, MIDDLE, LARGE)
    for row in bench.rows:
        assert row.change is not None and row.change.rounds >= 6
        assert len(row.kernel_samples_ms or []) >= 6
        assert row.reference_host_us is not None and row.kernel_host_us is not None
        assert row.speedup_low is not None and row.speedup_high is not None
        assert row.speedup_low <= row.speedup <= row.speedup_high
        assert len(row.kernel_host_process_us or []) == 3, row
        assert len(row.before_kernel_host_process_us or []) == 3, row
    # The pull request's kernel sleeps on every call for the small row: on the host, and
    # (no device here) in its device time too.
    assert small.kernel_host_us >= SLEEP_EVERY_CALL_S * 1e6
    assert small.kernel_ms >= SLEEP_EVERY_CALL_S * 1e3
    judged = {id(j.row): j for j in judged_rows(bench, THRESHOLD)}
    assert judged[id(small)].verdict is Verdict.slower, small.change
    # Every fourth call of the large and middle rows sleeps: the median call does not, the
    # host's average does, so both are host-bound.
    assert large.kernel_host_us / 1000 > 1.2 * large.kernel_ms
    assert middle.kernel_host_us / 1000 > 1.2 * middle.kernel_ms
    big = judged[id(large)]
    assert big.host_verdict is Verdict.slower and big.on_host, big
    assert big.device_verdict is not Verdict.slower, big
    assert big.host_change is not None and big.host_change.rounds == 3
    aa = judged[id(middle)]
    assert aa.host_verdict in (Verdict.same, Verdict.noisy), aa
    assert aa.verdict in (Verdict.same, Verdict.noisy), aa

    view = job_view(spec, result, tmp_path / "job.log", ComparePolicy(THRESHOLD, "fail"))
    report = render_comment(view)
    assert "in one process per tree kept across rounds, taken in turn" in report
    assert "📉 2 rows slower beyond noise" in report
    assert f"{small.speedup:.3f}x ({small.speedup_low:.2f}–{small.speedup_high:.2f})" in report
    (note,) = [line for line in report.split("\n") if line.startswith("Host-bound rows")]
    assert "float32 4096: host" in note and "float32 64:" not in note
    (host,) = [line for line in report.split("\n") if line.startswith("**Host time:**")]
    assert "2 host-bound rows" in host and "timed in 3 processes per tree" in host
    assert "1 flagged on host time" in host
    (line,) = [r for r in report.split("\n") if r.startswith("| float32 | 4096 ")]
    assert "· host +" in line and line.index("· host") < line.index(SLOWER), line
    assert render_status(view).state == "failure"


def test_with_nothing_to_compare_the_table_is_still_medians_over_rounds(tmp_path: Path) -> None:
    """An operator the pull request adds (its merge base has no benchmark of it; `--no-compare`
    takes the same way, tests/runner/test_kinds.py): the pull request's worker alone serves
    round after round, and each row's speedup is the median over at least six rounds with its
    interval, not one process's reading."""
    workflow = _workflow(6, timer_ms=4, benchmark_only=True)
    _, _, result, text = _compare(tmp_path, workflow, new_op=True)
    assert result.status is JobStatus.succeeded, text
    bench = result.benchmark
    assert bench is not None and bench.compare_mode == "workers", text
    (rounds,) = [s for s in result.steps if s.name == "benchmark (rounds)"]
    assert (rounds.message or "").startswith("6 rounds alone"), rounds
    answers = [json.loads(p.read_text()) for p in (tmp_path / "job" / "artifacts").glob(
        "bench-rounds-after/round-*.json")]  # fmt: skip
    assert len(answers) == 6 and len({a["pid"] for a in answers}) == 1
    for row in bench.rows:
        assert len(row.kernel_samples_ms or []) == 6 and row.before_kernel_ms is None
        assert row.speedup_low is not None and row.speedup_high is not None
        assert row.speedup_low <= row.speedup <= row.speedup_high
        assert row.kernel_rounds is not None and row.kernel_rounds.rounds == 6
    (skipped,) = [s for s in result.steps if s.name == "benchmark (merge base)"]
    assert skipped.status == "skipped" and "no benchmark" in (skipped.message or "")


WORKER = """
import json, os, sys, time
requests, answers = os.environ["BENCH_ROUNDS_DIR"], os.environ["BENCH_ROUNDS_OUT"]
mode = sys.argv[1]
while not os.path.exists(os.path.join(requests, "round-1.request")):
    time.sleep(0.01)
if mode == "silent":
    time.sleep(600)
path = os.path.join(answers, "round-1.json")
if mode == "oversized":
    body = {"round": 1, "pid": os.getpid(), "failed": False,
            "timings": [{"host_ms": 1.0, "device_ms": 1.0}] * 80000}
elif mode == "malformed":
    body = {"round": 1, "pid": "me", "failed": False, "timings": [{"host_ms": -1}]}
with open(path + ".tmp", "w") as f:
    json.dump(body, f)
os.replace(path + ".tmp", path)
time.sleep(600)
"""


def _worker(tmp_path: Path, mode: str, timeout_s: float = 1.5) -> bench_workers.Worker:
    job = tmp_path / "job"
    requests, answers = bench_workers.prepare(job, job / "artifacts", "after")
    lines: list[str] = []
    worker = bench_workers.Worker(
        name="after", tree=tmp_path, records="result*.log", op=OP, requests=requests,
        answers=answers, log=lines.append, first_timeout_s=timeout_s,
    )  # fmt: skip
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = bench_workers.worker_env({"PATH": "/usr/bin:/bin"}, tmp_path, requests, answers, 60)
    assert worker.start([sys.executable, str(script), mode], env, lambda _: None)
    return worker


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("silent", "no answer to round 1 within 1.5 s"),
        ("oversized", "round 1's answer refused: unreadable: larger than"),
        ("malformed", "round 1's answer refused: pid: Input should be a valid integer"),
    ],
)
def test_a_worker_that_cannot_be_heard_ends_the_rounds(tmp_path: Path, mode: str, why: str) -> None:
    """A worker that never answers is given up after its timeout; an answer too large, or
    not of the schema, is refused; either way no round comes, and its process group ends."""
    worker = _worker(tmp_path, mode, 1.5 if mode == "silent" else 60)
    try:
        assert worker.round(threading.Event()) is None
        assert worker.failure.startswith(why), worker.failure
        assert worker.rounds == 0
    finally:
        outcome = worker.stop(grace_s=0.5)
    assert outcome is not None and outcome.exit_code != 0  # it had to be killed
    assert (worker.requests / "stop").exists()


def test_a_cancelled_job_stops_waiting_for_its_worker(tmp_path: Path) -> None:
    worker = _worker(tmp_path, "silent")
    cancel = threading.Event()
    cancel.set()
    try:
        assert worker.round(cancel) is None and worker.failure == "cancelled"
    finally:
        worker.stop(grace_s=0.5)


def test_answers_are_checked_before_use() -> None:
    """An answer is a worker's word, read as hostile: every way it can be wrong is refused
    with what is wrong, and the round is the one asked for."""
    good = {"round": 2, "pid": 7, "failed": False, "timings": [{"host_ms": 1, "device_ms": 0.5}]}
    answer = bench_workers.parse_answer(json.dumps(good), 2)
    assert answer.pid == 7 and answer.timings == (bench_workers.Timing(host_ms=1.0, device_ms=0.5),)
    reading = {"host_ms": 1, "device_ms": 1}
    bad = [
        ("[]", "should be an object"),
        ("{", "Invalid JSON"),
        (json.dumps({**good, "round": 1}), "not the answer to round 2"),
        (json.dumps({**good, "pid": 0}), "pid: .*greater than 0"),
        (json.dumps({**good, "failed": "no"}), "failed: .*boolean"),
        (json.dumps({**good, "timings": [{**reading, "host_ms": True}]}), "host_ms: .*number"),
        (json.dumps({**good, "timings": [{**reading, "device_ms": float("nan")}]}), "finite"),
        (json.dumps({**good, "timings": [{**reading, "host_ms": -1}]}), "greater than or equal"),
        (json.dumps({**good, "timings": [reading] * 20_001}), "at most 20000"),
    ]
    for text, why in bad:
        with pytest.raises(bench_workers.AnswerError, match=why):
            bench_workers.parse_answer(text, 2)


def test_a_calls_device_time_leaves_the_flush_out_even_when_names_collide() -> None:
    """The CUDA timer's arithmetic on profiles: the flush's kernels (as profiled alone, in the
    same dispatch) are left out by name; where the operator launches a kernel of the same name
    (it fills too), the flushes' mean time is taken off instead."""
    from runner.plugins.pytest_bench_rounds import own_device_ms

    flushes = [("fill_int8", 0.050)] * 3
    distinct = [("fill_int8", 0.050), ("scale_kernel", 0.010)] * 4
    assert own_device_ms(distinct, flushes, 3, 4) == pytest.approx(0.010)
    colliding = [("fill_int8", 0.050), ("fill_int8", 0.002), ("scale_kernel", 0.010)] * 4
    assert own_device_ms(colliding, flushes, 3, 4) == pytest.approx(0.012)
    two_per_flush = [("memset", 0.001), ("fill_int8", 0.049), ("scale_kernel", 0.010)] * 5
    alone = [("memset", 0.001), ("fill_int8", 0.049)] * 3
    assert own_device_ms(two_per_flush, alone, 3, 5) == pytest.approx(0.010)


def test_an_autotuners_timing_goes_to_the_timer_it_replaced_not_into_the_round(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A kernel autotuner looks the timer up where the harness does: its calls (made with
    `self` an `Autotuner`, here a library's subclass) reach the timer that was there before,
    with their arguments, and add no reading to the round; the harness's own call adds one.
    The timer it replaced stands in for triton's, which needs a GPU."""
    import triton.testing
    from triton.runtime.autotuner import Autotuner

    from runner.plugins import pytest_bench_rounds as rounds

    asked: list[object] = []

    def replaced(fn: object, *args: object, **kwargs: object) -> list[float]:
        asked.append(kwargs.get("quantiles"))
        return [1.0, 0.9, 1.1]

    monkeypatch.setattr(triton.testing, "do_bench", replaced)
    monkeypatch.setattr(rounds, "_replaced", None)
    monkeypatch.setattr(rounds, "_timings", [])
    rounds._patch_do_bench()
    rounds._patch_do_bench()  # twice (configure, then the rounds): the replaced timer is kept

    class LibraryTuner(Autotuner):
        def __init__(self) -> None:  # no kernel: only what the timer sees matters
            pass

        def tune(self, fn: object) -> object:
            return (lambda call: triton.testing.do_bench(call, quantiles=(0.5, 0.2, 0.8)))(fn)

    calls: list[int] = []
    assert LibraryTuner().tune(lambda: calls.append(1)) == [1.0, 0.9, 1.1]
    assert asked == [(0.5, 0.2, 0.8)] and rounds._timings == [] and calls == []
    assert isinstance(triton.testing.do_bench(lambda: calls.append(1)), float)
    assert len(rounds._timings) == 1 and calls and asked == [(0.5, 0.2, 0.8)]
