"""The report renderer: the seed's result as a comment, every job state, escaping of test
output, length caps, the commit status, and the short replies to commands."""

from __future__ import annotations

import dataclasses
import re
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from report import comment as comment_module
from report import performance as performance_module
from report import table as table_module
from report.checks import render_status
from report.comment import COMMENT_BUDGET, MAX_COMMENT_CHARS, render_comment
from report.performance import INTERPRETER_NOTE
from report.summary import summary
from report.text import SLOWER
from report.verdicts import Verdict, judged_rows
from report.views import JobView
from service.receive.commands import (
    REGISTRY,
    USAGE,
    CommandError,
    Selector,
    format_command,
)
from service.receive.commands.cancel import CancelCommand
from service.render.replies import (
    BackendInfo,
    join_replies,
    render_cancel_summary,
    render_command_error,
    render_duplicate,
    render_help,
    render_not_allowed,
    render_retest_summary,
)
from workflows.models import (
    AccuracyResult,
    BenchmarkResult,
    BenchmarkRow,
    Change,
    EnvironmentInfo,
    JobResult,
    JobStatus,
    Proof,
    ProofLine,
    SkipGroup,
    StepResult,
    StepStatus,
    TestFailure,
)

SHA = "3f9c2e1d8b7a6f5e4d3c2b1a0f9e8d7c6b5a4f3e"
T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
OP = "adaptive_max_pool3d_backward"
# The seed's headline after "op on backend:", as markdown: geometric mean and the slowest row.
SEED_WORDS = (
    "69 passed, 3 skipped · geomean 2.31x · slowest 1.81x \\(float32 \\[1, 1, 4, 4, 4\\]\\)"
)

# The seed pull request's table: dtype, size, torch ms, kernel ms, speedup.
SEED_TABLE = """\
float16 1,1,4,4,4 0.008640 0.004440 1.946
float16 2,3,8,8,8 0.006600 0.003000 2.200
float16 1,1,16,16,16 0.007240 0.003040 2.382
float16 2,8,4,4,4 0.007480 0.003000 2.493
float32 1,1,4,4,4 0.008320 0.004600 1.809
float32 2,3,8,8,8 0.007560 0.003080 2.455
float32 1,1,16,16,16 0.009860 0.003120 3.160
float32 2,8,4,4,4 0.007400 0.003000 2.467
bfloat16 1,1,4,4,4 0.008600 0.004600 1.870
bfloat16 2,3,8,8,8 0.006800 0.003000 2.267
bfloat16 1,1,16,16,16 0.007520 0.003040 2.474
bfloat16 2,8,4,4,4 0.007620 0.003000 2.540"""


def seed_rows() -> list[BenchmarkRow]:
    rows = []
    for line in SEED_TABLE.splitlines():
        dtype, size, ref, kernel, speedup = line.split()
        rows.append(
            BenchmarkRow(
                dtype=dtype,
                size=[int(n) for n in size.split(",")],
                reference_ms=float(ref),
                kernel_ms=float(kernel),
                speedup=float(speedup),
            )
        )
    return rows


def seed_result(**changes: object) -> JobResult:
    """The seed's verdict: 69 passed, 3 skipped, the 12-row table, 2.34x mean."""
    rows = seed_rows()
    arith, geo = BenchmarkResult.means([r.speedup for r in rows])
    result = JobResult(
        status=JobStatus.succeeded,
        sha=SHA,
        environment=EnvironmentInfo(
            device_name="MTT S4000",
            vendor="mthreads",
            driver="2.7.0",
            torch="2.2.0",
            triton="3.1.0",
            torch_musa="1.3.0",
            runner_name="musa-01",
        ),
        steps=[
            StepResult(name="accuracy", status=StepStatus.succeeded, exit_code=0, duration_s=131),
            StepResult(name="benchmark", status=StepStatus.succeeded, exit_code=0, duration_s=61),
        ],
        accuracy=AccuracyResult(
            passed=69,
            skipped=3,
            skips=[
                SkipGroup(reason="output_size=(8,8,8) > input spatial dims (1,1,7,7,7)", count=3)
            ],
            implementation="kernels.backends._mthreads.ops.adaptive_max_pool3d_backward",
        ),
        benchmark=BenchmarkResult(
            op=OP, rows=rows, arithmetic_mean_speedup=arith, geometric_mean_speedup=geo
        ),
        started_at=T0,
        finished_at=T0 + timedelta(seconds=192),
    )
    return result.model_copy(update=changes)


def view(status: JobStatus = JobStatus.succeeded, **changes: object) -> JobView:
    base = JobView(
        id=42,
        repo="flagos/kernels",
        pr_number=7,
        op=OP,
        backend="mthreads",
        sha=SHA,
        status=status,
        bench=True,
        compare=True,
        created_at=T0,
        started_at=T0,
        finished_at=T0 + timedelta(seconds=192),
        runner_name="musa-01",
        queue_position=None,
        runners_online=2,
        job_url="https://ondemand.example/jobs/42",
        log_url="https://ondemand.example/jobs/42/log",
        result=seed_result(status=status) if status.final else None,
        reason=None,
    )
    return dataclasses.replace(base, **changes)


# --- structure checks used throughout ----------------------------------------------------------


def fenced_blocks(text: str) -> list[str]:
    """The contents of the fenced code blocks, asserting every fence is closed (CommonMark)."""
    blocks: list[str] = []
    fence: str | None = None
    body: list[str] = []
    for line in text.split("\n"):
        if fence is None:
            fence, body = _opens_fence(line), []
        elif line.startswith(fence) and not line.strip().strip(fence[0]):
            blocks.append("\n".join(body))
            fence = None
        else:
            body.append(line)
    assert fence is None, "a code block is left open"
    return blocks


def _opens_fence(line: str) -> str | None:
    match = re.match(r"^(`{3,}|~{3,})(.*)$", line)
    if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
        return match.group(1)
    return None


def _strip_code_spans(text: str) -> str:
    """Drop code spans the CommonMark way: a backtick run closes at the next run of the same
    length; a backslash-escaped backtick outside a span is literal text."""
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\" and i + 1 < len(text):
            out.append(text[i : i + 2])
            i += 2
            continue
        if char != "`":
            out.append(char)
            i += 1
            continue
        run = re.match(r"`+", text[i:]).group(0)
        close = re.compile(rf"(?<!`){run}(?!`)")
        found = close.search(text, i + len(run))
        if found is None:
            out.append(run)
            i += len(run)
        else:
            i = found.end()
    return "".join(out)


def outside_code(text: str) -> str:
    """The markdown with code blocks and code spans removed: what GitHub interprets."""
    lines: list[str] = []
    fence: str | None = None
    for line in text.split("\n"):
        if fence is None:
            fence = _opens_fence(line)
            if fence is None:
                lines.append(line)
        elif line.startswith(fence) and not line.strip().strip(fence[0]):
            fence = None
    return _strip_code_spans("\n".join(lines))


def cells(line: str) -> list[str]:
    """A table row's cells, split on pipes GitHub does not see as escaped."""
    return re.split(r"(?<!\\)\|", line.strip().strip("|"))


def tables(text: str) -> list[list[str]]:
    found: list[list[str]] = []
    current: list[str] = []
    for line in [*text.split("\n"), ""]:
        if line.startswith("|"):
            current.append(line)
        elif current:
            found.append(current)
            current = []
    return found


def assert_well_formed(text: str) -> None:
    assert len(text) <= MAX_COMMENT_CHARS
    fenced_blocks(text)
    flat = outside_code(text)
    assert flat.count("<details>") == flat.count("</details>")
    for table in tables(flat):
        widths = {len(cells(row)) for row in table}
        assert len(widths) == 1, f"table rows of different widths: {table}"


# --- the seed's result ---------------------------------------------------------------------


def test_seed_result_renders_headline_facts_accuracy_and_the_seed_table() -> None:
    text = render_comment(view())
    lines = text.split("\n")
    assert lines[0] == f"<!-- ondemand:{OP}:mthreads -->"
    assert f"### ✅ `{OP}` on `mthreads`: {SEED_WORDS}" in lines
    facts = next(line for line in lines if line.startswith("Commit "))
    for part in (
        "`3f9c2e1`",
        "runner `musa-01`",
        "MTT S4000",
        "3m 12s",
        "[job #42](https://ondemand.example/jobs/42)",
        "[full log](https://ondemand.example/jobs/42/log)",
    ):
        assert part in facts
    env = next(line for line in lines if line.startswith("**Environment:**"))
    for part in ("`MTT S4000`", "`mthreads`", "driver `2.7.0`", "torch `2.2.0`", "triton `3.1.0`"):
        assert part in env
    assert "torch_musa `1.3.0`" in env
    assert "**69 passed, 3 skipped** of 72 tests" in text
    assert "kernels.backends._mthreads.ops.adaptive_max_pool3d_backward" in text
    assert "- 3 × output\\_size=\\(8,8,8\\) &gt; input spatial dims" in text
    header = "| dtype | Size | Torch Latency (ms) | Kernel Latency (ms) | Speedup |"
    table = lines[lines.index(header) : lines.index(header) + 14]
    assert table[1] == "|---|---|---|---|---|"
    assert table[2] == "| float16 | 1, 1, 4, 4, 4 | 0.008640 | 0.004440 | 1.946x |"
    assert table[13] == "| bfloat16 | 2, 8, 4, 4, 4 | 0.007620 | 0.003000 | 2.540x |"
    assert "Geometric mean speedup: **2.31x** · slowest row: **1.81x**" in text
    assert "<sub>Arithmetic mean speedup: 2.34x, as FlagGems reports it.</sub>" in text
    assert "not performance" not in text and "📉" not in text
    assert "✅ `accuracy` 2m 11s · ✅ `benchmark` 1m 01s" in text
    assert_well_formed(text)


def test_the_proof_log_names_each_path_with_its_count() -> None:
    prefix = "KERNELS_MTHREADS ADAPTIVE_MAX_POOL3D_BACKWARD"
    lines = [ProofLine(message=f"{prefix} path=expand", count=40)]
    lines.append(ProofLine(message=f"{prefix} path=generic:float64", count=12))
    acc = seed_result().accuracy
    assert acc is not None
    proved = acc.model_copy(update={"proof": Proof(prefix="KERNELS_MTHREADS", lines=lines)})
    text = render_comment(view(result=seed_result(accuracy=proved)))
    assert (
        "Proof log `KERNELS_MTHREADS`: `ADAPTIVE_MAX_POOL3D_BACKWARD path=expand` × 40 · "
        "`ADAPTIVE_MAX_POOL3D_BACKWARD path=generic:float64` × 12"
    ) in text
    silent = acc.model_copy(update={"proof": Proof(prefix="KERNELS_MTHREADS")})
    text = render_comment(view(result=seed_result(accuracy=silent)))
    assert "Proof log: no `KERNELS_MTHREADS` line was logged" in text
    assert "⚠️" not in text  # no specialization known here: nothing to warn of
    # The checkout holds the operator's specialization, yet nothing was logged: a warning.
    where = "kernels/backends/_mthreads/ops/adaptive_max_pool3d_backward"
    unproved = silent.model_copy(
        update={"proof": Proof(prefix="KERNELS_MTHREADS", specialization=where)}
    )
    text = render_comment(view(result=seed_result(accuracy=unproved)))
    assert (
        f"⚠️ Proof log: `{where}` specializes this operator, yet no `KERNELS_MTHREADS` line "
        "was logged: these tests and timings are not of it"
    ) in text
    # ...and says it first, in the headline and the commit status (whose state it leaves).
    assert f"⚠️ `{OP}` on `mthreads`: its mthreads specialization never ran · 69 passed" in text
    status = render_status(view(result=seed_result(accuracy=unproved)))
    assert status.state == "success"
    assert status.description.startswith("its mthreads specialization never ran · 69 passed")
    assert_well_formed(text)
    skipped = unproved.model_copy(update={"passed": 0, "failed": 0})  # nothing ran: no claim
    text = render_comment(view(result=seed_result(accuracy=skipped)))
    assert "⚠️" not in text and "Proof log: no `KERNELS_MTHREADS` line was logged" in text
    logged = Proof(prefix="KERNELS_MTHREADS", lines=lines, specialization=where)
    ran = acc.model_copy(update={"proof": logged})
    text = render_comment(view(result=seed_result(accuracy=ran)))
    assert "⚠️" not in text and "path=expand` × 40" in text  # it ran: no warning
    assert "Proof log" not in render_comment(view())  # no proof asked for: no line
    assert_well_formed(text)


def test_status_of_the_seed_result() -> None:
    status = render_status(view())
    assert status.state == "success"
    assert status.context == f"ondemand/{OP}:mthreads"
    assert status.target_url == "https://ondemand.example/jobs/42"
    assert status.description == (
        "69 passed, 3 skipped · geomean 2.31x · slowest 1.81x (float32 [1, 1, 4, 4, 4])"
    )


# --- every state ---------------------------------------------------------------------------


def failed_result() -> JobResult:
    failures = [
        TestFailure(
            test_id=f"tests/kernels/test_pool.py::test_backward[float16-shape{i}]",
            message="AssertionError: max abs diff 0.5 > atol 1e-3",
            traceback_tail="def test_backward():\n>   assert_close(out, ref)\nE   AssertionError",
        )
        for i in range(2)
    ]
    return seed_result(
        status=JobStatus.failed,
        accuracy=AccuracyResult(passed=67, failed=2, skipped=3, failures=failures),
        steps=[
            StepResult(name="accuracy", status=StepStatus.failed, exit_code=1, duration_s=100),
            StepResult(name="benchmark", status=StepStatus.succeeded, exit_code=0, duration_s=50),
        ],
    )


def errored_result(log: str = "Traceback...\nRuntimeError: MUSA driver not found") -> JobResult:
    return seed_result(
        status=JobStatus.errored,
        accuracy=None,
        benchmark=None,
        steps=[
            StepResult(
                name="device_check",
                status=StepStatus.errored,
                exit_code=3,
                duration_s=2,
                message="device check failed",
                log_tail=log,
            )
        ],
        error_step="device_check",
        error_message="no MUSA device",
    )


@pytest.mark.parametrize(
    ("job", "emoji", "words", "state"),
    [
        (
            view(JobStatus.queued, queue_position=3, started_at=None, finished_at=None),
            "⏳",
            "queued, position 3 on mthreads \\(2 runners online\\)",
            "pending",
        ),
        (
            view(JobStatus.queued, queue_position=1, runners_online=0, runner_name=None),
            "⏳",
            "no runner online for mthreads: the job waits",
            "pending",
        ),
        (view(JobStatus.running, finished_at=None), "🏃", "running on musa-01", "pending"),
        (view(JobStatus.succeeded), "✅", SEED_WORDS, "success"),
        (
            view(JobStatus.failed, result=failed_result()),
            "❌",
            "2 failed, 67 passed, " + SEED_WORDS.removeprefix("69 passed, "),
            "failure",
        ),
        (
            view(JobStatus.errored, result=errored_result()),
            "⚠️",
            "errored in step device\\_check \\(exit 3\\): no MUSA device",
            "error",
        ),
        (
            view(JobStatus.errored, result=None, reason="runner lost"),
            "⚠️",
            "errored: runner lost",
            "error",
        ),
        (
            view(JobStatus.timed_out, result=None, reason="no heartbeat for 120 s"),
            "⚠️",
            "timed out: no heartbeat for 120 s",
            "error",
        ),
        (
            view(JobStatus.cancelled, result=None, reason="cancelled by @dongxu-h"),
            "⛔",
            "cancelled by @\u2060dongxu-h",
            "pending",  # no verdict: not a failure of the code,
        ),
        (
            view(JobStatus.superseded, result=None, reason="superseded by 0badc0d"),
            "⛔",
            "superseded by 0badc0d",
            "pending",  # no verdict: not a failure of the code,
        ),
    ],
    ids=lambda v: v.status.value if isinstance(v, JobView) else None,
)
def test_every_state_has_its_headline_and_status(
    job: JobView, emoji: str, words: str, state: str
) -> None:
    text = render_comment(job)
    assert f"### {emoji} `{OP}` on `mthreads`: {words}" in text.split("\n")
    status = render_status(job)
    assert status.state == state
    assert len(status.description) <= 140
    assert status.description == words.replace("\\", "").replace("\u2060", "")
    assert_well_formed(text)


def test_queued_comment_links_the_job_but_has_no_log_yet() -> None:
    text = render_comment(view(JobStatus.queued, queue_position=2, started_at=None))
    assert "[job #42](https://ondemand.example/jobs/42)" in text
    assert "log" not in text


def test_running_comment_links_the_live_log() -> None:
    text = render_comment(view(JobStatus.running, attempt=2, finished_at=None))
    assert "[live log](https://ondemand.example/jobs/42/log)" in text
    assert "running on musa-01 \\(attempt 2\\)" in text


def test_failures_show_test_id_message_and_traceback_in_details() -> None:
    text = render_comment(view(JobStatus.failed, result=failed_result()))
    assert "**Failures (2)**" in text
    assert (
        "`tests/kernels/test_pool.py::test_backward[float16-shape0]`: "
        "`AssertionError: max abs diff 0.5 > atol 1e-3`"
    ) in text
    assert text.count("<details><summary>traceback</summary>") == 2
    assert any(">   assert_close(out, ref)" in block for block in fenced_blocks(text))
    assert "#### Error" not in text and "#### Failed step" not in text
    assert_well_formed(text)


def test_failed_without_failure_details_shows_the_failed_step_log() -> None:
    result = failed_result()
    acc = AccuracyResult(failed=1, errors=1)
    steps = [
        StepResult(
            name="accuracy",
            status=StepStatus.failed,
            exit_code=2,
            log_tail="ERROR collecting tests/kernels/test_pool.py\nImportError: cannot import x",
        )
    ]
    text = render_comment(
        view(JobStatus.failed, result=result.model_copy(update={"accuracy": acc, "steps": steps}))
    )
    assert "1 failed, 1 error, 0 passed" in text
    assert "No failure details were reported" in text
    assert "Step `accuracy` failed with exit status 2" in text
    assert any("ImportError: cannot import x" in b for b in fenced_blocks(text))


def test_error_shows_the_step_its_exit_status_and_the_log_tail() -> None:
    log = "\n".join(f"line {i}" for i in range(500))
    text = render_comment(view(JobStatus.errored, result=errored_result(log)))
    assert "#### Error" in text
    assert "Step `device_check` errored with exit status 3: no MUSA device." in text
    [block] = fenced_blocks(text)
    assert block.split("\n")[-1] == "line 499"
    assert block.split("\n")[0] == "… 440 earlier lines"
    assert "line 439" not in block
    assert "#### Accuracy" not in text and "#### Performance" not in text


def test_runner_lost_without_a_result_says_why() -> None:
    text = render_comment(view(JobStatus.errored, result=None, reason="runner lost"))
    assert "**Error:** runner lost" in text


def test_superseded_explains_that_new_code_needs_a_new_command() -> None:
    text = render_comment(view(JobStatus.superseded, result=None, reason="superseded by 0badc0d"))
    assert "needs a new `/test`" in text


def test_unknown_operator_says_so_with_close_matches() -> None:
    result = seed_result(
        status=JobStatus.failed,
        accuracy=None,
        benchmark=None,
        unknown_op=True,
        close_matches=["adaptive_max_pool3d_backward", "adaptive_max_pool3d"],
    )
    job = view(JobStatus.failed, op="adaptive_max_pool3d_backwrd", result=result)
    text = render_comment(job)
    assert "### ⚠️ `adaptive_max_pool3d_backwrd` on `mthreads`: no operator" in text
    assert "No test in commit `3f9c2e1` is marked `adaptive_max_pool3d_backwrd`" in text
    assert "Close matches: `adaptive_max_pool3d_backward`, `adaptive_max_pool3d`." in text
    status = render_status(job)
    assert status.state == "error"
    assert "no operator adaptive_max_pool3d_backwrd" in status.description


# --- performance variants ------------------------------------------------------------------


def test_interpreter_timings_are_marked_not_performance() -> None:
    result = seed_result()
    bench = result.benchmark.model_copy(update={"performance": False, "device": "cpu"})
    text = render_comment(
        view(
            JobStatus.succeeded,
            backend="cpu",
            result=result.model_copy(update={"benchmark": bench}),
        )
    )
    assert INTERPRETER_NOTE in text
    assert "Timed under the Triton interpreter: not performance." in text
    headline = (
        f"### ✅ `{OP}` on `cpu`: 69 passed, 3 skipped · latencies only \\(Triton interpreter\\)"
    )
    assert headline in text.split("\n")
    # Latencies without speedups: no speedup column, no 0.000x, no means.
    assert "Speedup" not in text and "x |" not in text and "mean speedup" not in text


def test_before_after_bandwidth_and_output_size_columns() -> None:
    rows = [
        r.model_copy(
            update={
                "before_kernel_ms": r.kernel_ms * 2,
                "before_speedup": r.speedup / 2,
                "gbps": 812.34,
                "bandwidth_fraction": 0.83,
                "output_size": [2, 2, 2],
            }
        )
        for r in seed_rows()
    ]
    result = seed_result()
    bench = result.benchmark.model_copy(
        update={"rows": rows, "before_arithmetic_mean_speedup": 1.17}
    )
    text = render_comment(view(result=result.model_copy(update={"benchmark": bench})))
    header = (
        "| dtype | Size | Torch Latency (ms) | Kernel Latency (ms) before → after "
        "| Change (95 %) | Rounds | Speedup | GB/s | % of copy bandwidth |"
    )
    assert header in text
    assert (
        "| float16 | 1, 1, 4, 4, 4 → 2, 2, 2 | 0.008640 | 0.008880 → 0.004440 "
        "| -50.0 % ±? 〰️ too noisy | 1 | 1.946x | 812.3 | 83% |"
    ) in text
    assert "Arithmetic mean speedup: 2.34x (before: 1.17x)" in text
    assert "📉" not in text and "📈" not in text  # one run a side: nothing judged
    assert_well_formed(text)
    # --no-compare drops the before columns even when the runner sent them
    plain = render_comment(
        view(compare=False, result=result.model_copy(update={"benchmark": bench}))
    )
    assert "before" not in plain and "(`--no-compare`)" in plain
    # under the interpreter, bandwidth columns would be noise: they are left out
    slow = bench.model_copy(update={"performance": False})
    interp = render_comment(view(result=result.model_copy(update={"benchmark": slow})))
    assert "GB/s" not in interp and "% of copy bandwidth" not in interp
    assert "not performance" in interp


def test_workers_comparison_shows_the_speedup_spread_and_the_host_bound_rows() -> None:
    """A comparison in a worker per tree: the note says how, each speedup carries its
    interval over rounds, and the rows whose host time per call exceeds their device time are
    named below the table with both figures (escaped like every cell)."""
    rows = [
        r.model_copy(
            update={
                "before_kernel_ms": r.kernel_ms,
                "kernel_rounds": None,
                "change": Change(rounds=8, ratio=1.0, low=0.99, high=1.01),
                "speedup_low": r.speedup * 0.95,
                "speedup_high": r.speedup * 1.05,
                "kernel_host_us": 61.0 if i in (0, 5) else r.kernel_ms * 1000 * 0.8,
                "reference_host_us": 20.0,
            }
        )
        for i, r in enumerate(seed_rows())
    ]
    rows[5] = rows[5].model_copy(update={"dtype": NASTY})
    result = seed_result()
    bench = result.benchmark.model_copy(update={"rows": rows, "compare_mode": "workers"})
    text = render_comment(view(result=result.model_copy(update={"benchmark": bench})))
    assert "in one process per tree kept across rounds, taken in turn (8 rounds a row)" in text
    assert "| 1.946x (1.85–2.04) |" in text
    (note,) = [line for line in text.split("\n") if line.startswith("Host-bound rows")]
    assert note.startswith("Host-bound rows (host time per call above device time): ")
    # The most host-bound first: 61 µs over 3.1 µs, then 61 µs over 4.4 µs.
    assert note.endswith(
        "2, 3, 8, 8, 8: host 61 µs, device 3.1 µs; float16 1, 1, 4, 4, 4: host 61 µs, device 4.4 µs"
    )
    assert note.count("host 61 µs") == 2 and "<script>" not in note and "@torvalds" not in note
    assert_well_formed(text)
    # A device-bound table (host time at or below the device's) names none.
    calm = [r.model_copy(update={"kernel_host_us": r.kernel_ms * 1000}) for r in rows]
    quiet = result.benchmark.model_copy(update={"rows": calm, "compare_mode": "workers"})
    assert "Host-bound" not in render_comment(
        view(result=result.model_copy(update={"benchmark": quiet}))
    )


def test_host_bound_rows_from_synthetic_timings() -> None:
    """Host-bound: the kernel's host time per call beyond its device time by more than the
    margin (back to back, a device-bound call's host time is about its device time)."""

    def row(kernel_ms: float, host_us: float | None) -> BenchmarkRow:
        return BenchmarkRow(
            dtype="float16", size=[4], reference_ms=0.01, kernel_ms=kernel_ms, speedup=1.0,
            kernel_host_us=host_us,
        )  # fmt: skip

    rows = [
        row(0.012, 61.0),  # host 61 µs, device 12 µs: host-bound, 5x
        row(0.100, 110.0),  # 1.1x: within the margin
        row(0.010, 30.0),  # 3x
        row(0.050, None),  # no host figure
        row(0.200, 20.0),  # device-bound
    ]
    assert [r.kernel_host_us for r in performance_module.host_bound(rows)] == [61.0, 30.0]
    assert performance_module.host_bound(rows, ratio=1.05)[-1].kernel_host_us == 110.0
    assert performance_module.host_bound([]) == []


def test_no_bench_says_the_benchmark_was_not_run_and_headline_has_no_speedup() -> None:
    text = render_comment(view(bench=False, result=seed_result(benchmark=None)))
    assert "Benchmark not run (`--no-bench`)." in text
    assert "speedup" not in text.split("\n")[2]


def test_means_are_computed_when_the_runner_sent_none() -> None:
    result = seed_result()
    bench = result.benchmark.model_copy(
        update={"arithmetic_mean_speedup": None, "geometric_mean_speedup": None}
    )
    text = render_comment(view(result=result.model_copy(update={"benchmark": bench})))
    assert "Geometric mean speedup: **2.31x**" in text
    assert "Arithmetic mean speedup: 2.34x" in text


# --- escaping and caps ---------------------------------------------------------------------

NASTY = "a|b `tick` ``` <script>alert(1)</script> **bold** @torvalds [x](http://e.vil) #1\n|---|"


def test_untrusted_text_cannot_break_tables_fences_html_or_mention_people() -> None:
    rows = [r.model_copy(update={"dtype": NASTY}) for r in seed_rows()]
    result = seed_result(
        status=JobStatus.failed,
        environment=EnvironmentInfo(device_name=NASTY, torch=NASTY),
        accuracy=AccuracyResult(
            passed=1,
            failed=1,
            skipped=1,
            failures=[
                TestFailure(test_id=NASTY, message=NASTY, traceback_tail=NASTY + "\n~~~\n```")
            ],
            skips=[SkipGroup(reason=NASTY, count=1)],
        ),
    )
    result = result.model_copy(
        update={"benchmark": result.benchmark.model_copy(update={"rows": rows})}
    )
    text = render_comment(view(JobStatus.failed, runner_name=NASTY, result=result))
    assert_well_formed(text)
    visible = outside_code(text)
    assert "<script>" not in visible
    assert "@torvalds" not in visible
    assert "**bold**" not in visible
    assert "](http://e.vil)" not in visible
    # the traceback keeps its fences as text inside a longer fence
    assert any(block.endswith("~~~\n```") for block in fenced_blocks(text))
    [perf] = [t for t in tables(outside_code(text)) if "Speedup" in t[0]]
    assert len(perf) == 14 and all(len(cells(row)) == 5 for row in perf)


def test_ansi_colour_and_control_characters_are_dropped_from_logs() -> None:
    text = render_comment(
        view(JobStatus.errored, result=errored_result("\x1b[31mFAILED\x1b[0m boom\x00\x07"))
    )
    assert any(block == "FAILED boom" for block in fenced_blocks(text))


def test_thousands_of_huge_failures_are_trimmed_to_fit_one_comment() -> None:
    failures = [
        TestFailure(
            test_id=f"tests/kernels/test_pool.py::test_case[{i}]",
            message="E" * 5000,
            traceback_tail="\n".join("x" * 200 for _ in range(200)),
        )
        for i in range(3000)
    ]
    result = seed_result(
        status=JobStatus.failed,
        accuracy=AccuracyResult(passed=0, failed=3000, failures=failures),
        benchmark=BenchmarkResult(op=OP, rows=seed_rows() * 100),
    )
    history = [
        view(JobStatus.failed, id=i, created_at=T0 - timedelta(hours=i)) for i in range(1, 60)
    ]
    text = render_comment(view(JobStatus.failed, result=result), history)
    assert_well_formed(text)
    assert len(text) <= 60000
    assert "**Failures (3000)**" in text
    assert re.search(r"… 29\d\d more failures: see the \[full log\]", text)
    assert "more rows on the job page" in text
    assert "older" in text


def test_a_huge_log_tail_is_cut_to_its_last_lines() -> None:
    log = "\n".join("y" * 10_000 for _ in range(1000))
    text = render_comment(view(JobStatus.errored, result=errored_result(log)))
    assert_well_formed(text)
    assert len(text) < 20_000
    assert "earlier lines" in text


def test_history_is_collapsed_newest_first_without_the_current_run() -> None:
    current = view(JobStatus.queued, id=44, created_at=T0 + timedelta(hours=2))
    older = view(JobStatus.errored, id=42, result=None, reason="runner lost")
    newer = view(
        JobStatus.failed,
        id=43,
        created_at=T0 + timedelta(hours=1),
        result=failed_result(),
        job_url="https://ondemand.example/jobs/43",
    )
    text = render_comment(current, [older, newer, current])
    assert "<details><summary>Earlier runs (2)</summary>" in text
    first = text.index("[job #43](https://ondemand.example/jobs/43)")
    second = text.index("errored: runner lost")
    assert first < second
    assert "2026-11-30 13:00 UTC" in text
    assert text.count("job #44") == 1  # only in the current run's line
    assert_well_formed(text)


MARKDOWNISH = st.lists(
    st.sampled_from(
        [
            "`",
            "```",
            "\n```\n",
            "\n````",
            "~~~",
            "|",
            "\n",
            "<",
            ">",
            "@a",
            "*",
            "_",
            "[",
            "]",
            "\\",
            " ",
            "x",
        ]
    ),
    max_size=60,
).map("".join)


@settings(max_examples=150, deadline=None)
@given(
    words=st.lists(st.text(max_size=300) | MARKDOWNISH, min_size=6, max_size=6),
    status=st.sampled_from(list(JobStatus)),
    count=st.integers(min_value=0, max_value=40),
)
def test_any_test_output_renders_well_formed(
    words: list[str], status: JobStatus, count: int
) -> None:
    test_id, message, trace, dtype, reason, device = words
    result = seed_result(
        status=status,
        environment=EnvironmentInfo(device_name=device, driver=reason),
        accuracy=AccuracyResult(
            passed=count,
            failed=count,
            failures=[TestFailure(test_id=test_id, message=message, traceback_tail=trace)] * count,
            skips=[SkipGroup(reason=reason, count=count)],
        ),
        benchmark=BenchmarkResult(
            op=OP, rows=[r.model_copy(update={"dtype": dtype}) for r in seed_rows()]
        ),
        steps=[StepResult(name=dtype or "s", status=StepStatus.errored, log_tail=trace)],
        error_message=message,
        close_matches=[test_id],
    )
    job = view(status, result=result if status.final else None, reason=reason or None)
    text = render_comment(job)
    assert_well_formed(text)
    assert text.startswith(f"<!-- ondemand:{OP}:mthreads -->\n")
    status_update = render_status(job)
    assert len(status_update.description) <= 140
    assert status_update.state in {"pending", "success", "failure", "error"}


# --- replies -------------------------------------------------------------------------------

BACKEND_INFO = [
    BackendInfo("cpu", ("interpreter",), "Triton through its CPU interpreter.", 1),
    BackendInfo(
        "mthreads",
        ("musa", "moore_threads"),
        "Moore Threads GPUs.",
        2,
        ("musa-03: no MUSA device",),
    ),
    BackendInfo("nvidia", ("cuda",), "NVIDIA GPUs through CUDA.", 0),
]


def test_help_lists_usage_backends_aliases_runners_and_defaults() -> None:
    text = render_help(REGISTRY.help_rows("help"), BACKEND_INFO, ["mthreads"])
    for part in ("`/test OP:BACKEND`", "`/test help` or `/test ?`", "`/test cancel`", "`/retest`"):
        assert part in text
    assert "--no-bench" in text and "--no-compare" in text
    assert "default backends (`mthreads`)" in text
    assert (
        "| `mthreads` | `musa`, `moore_threads` | 2 (unhealthy: musa-03: no MUSA device) |" in text
    )
    assert "| `nvidia` | `cuda` | 0 |" in text
    assert "write permission" in text
    assert_well_formed(text)


def test_command_error_quotes_the_line_and_says_what_is_accepted() -> None:
    err = CommandError(
        line="/test add:mthread `x`",
        message="unknown backend `mthread`. Did you mean `mthreads`?",
        suggestions=("mthreads", "threads"),
    )
    text = render_command_error(err.line, err.message, err.suggestions, USAGE, BACKEND_INFO)
    assert text.startswith("⚠️ I could not run this command: `` /test add:mthread `x` ``")
    assert "Unknown backend `mthread`. Did you mean `mthreads`?" in text
    assert "Close matches: `mthreads`, `threads`" in text
    assert "`nvidia` (0 runners online)" in text and "`cpu` (1 runner online)" in text
    assert "`/test help`" in text


def test_duplicate_points_at_the_existing_job() -> None:
    queued = view(JobStatus.queued, queue_position=2)
    text = render_duplicate(OP, "mthreads", queued)
    assert f"`{OP}` on `mthreads` is already queued for commit `3f9c2e1`" in text
    assert "[job #42](https://ondemand.example/jobs/42)" in text
    assert "position 2" in text and "not queued again" in text
    running = render_duplicate(OP, "mthreads", view(JobStatus.running))
    assert "already running" in running


def cancel_summary(views: list[JobView], cmd: CancelCommand) -> str:
    return render_cancel_summary(views, [str(s) for s in cmd.selectors], format_command(cmd))


def test_cancel_summary_lists_the_jobs_or_says_nothing_matched() -> None:
    request = CancelCommand((Selector(OP, "mthreads"), Selector("add", None)))
    assert cancel_summary([], CancelCommand(())) == (
        "Nothing to cancel: no queued or running job of this pull request.\n"
    )
    nothing = cancel_summary([], request)
    assert f"matching `{OP}:mthreads`, `add`" in nothing
    text = cancel_summary([view(JobStatus.cancelled)], request)
    assert text.startswith("⛔ Cancelled 1 job matching")
    assert f"- `{OP}` on `mthreads` · commit `3f9c2e1` · [job #42]" in text


def test_retest_summary() -> None:
    assert render_retest_summary([]) == "Nothing failed: nothing to retest.\n"
    text = render_retest_summary([view(JobStatus.queued, id=50), view(JobStatus.queued, id=51)])
    assert "Running again 2 jobs whose last run failed or errored" in text
    assert "[job #50]" in text and "[job #51]" in text


def test_not_allowed_addresses_the_commenter_and_gives_the_reason() -> None:
    text = render_not_allowed("drive-by", "@drive-by has read permission on the repository")
    assert text.startswith("@drive-by: only people with write permission")
    assert "nothing was run" in text
    assert "@drive-by has" not in text  # the reason does not ping them twice


def test_when_nothing_fits_the_comment_falls_back_to_headline_and_links(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(comment_module, "COMMENT_BUDGET", 600)
    text = render_comment(view(JobStatus.failed, result=failed_result()))
    assert len(text) <= 600
    assert text.startswith(f"<!-- ondemand:{OP}:mthreads -->\n")
    assert (
        "too long for a comment" in text and "[job page](https://ondemand.example/jobs/42)" in text
    )
    assert "#### Accuracy" not in text


def test_replies_are_joined_within_githubs_comment_limit() -> None:
    parts = [f"answer {i}: " + "x" * 5000 for i in range(30)]
    text = join_replies(parts)
    assert len(text) <= COMMENT_BUDGET
    kept = text.count("answer ")
    assert 0 < kept < 30 and f"… {30 - kept} more answers left out" in text
    assert join_replies(["a", "b"]) == "a\n\n---\n\nb"


def test_a_requeued_attempt_says_why_while_it_waits() -> None:
    waiting = view(
        JobStatus.queued,
        attempt=2,
        reason="musa-01 stopped (SIGTERM); requeued",
        queue_position=1,
        runner_name=None,
    )
    assert summary(waiting) == (
        "musa-01 stopped (SIGTERM); requeued (attempt 2): queued, position 1 on mthreads "
        "(2 runners online)"
    )
    # A first attempt waits without a story.
    assert summary(view(JobStatus.queued, queue_position=1)).startswith("queued, position 1")


def test_a_host_bound_rows_host_change_is_shown_beside_its_device_change_never_judged() -> None:
    """A row whose kernel's host time per call is well above its device time: its host time's
    change and what that alone says are shown, but the verdict is the device time's (a host
    time 23 % slower flags nothing while the device did not move; a device time too noisy
    stays so whatever the host says; a device slowdown is flagged though the host is the
    same); a device-bound row shows no host change."""
    same_device = Change(rounds=8, ratio=1.0, low=0.99, high=1.01)
    noisy_device = Change(rounds=8, ratio=1.1, low=0.7, high=1.6)
    slower_device = Change(rounds=8, ratio=1.5, low=1.45, high=1.55)
    slower_host = Change(rounds=8, ratio=1.23, low=1.2, high=1.26)
    same_host = Change(rounds=8, ratio=1.0, low=0.98, high=1.02)

    def row(host_us: float, device: Change, host: Change) -> BenchmarkRow:
        return BenchmarkRow(
            dtype="float16", size=[1, 1, 8, 8, 8], reference_ms=0.007, kernel_ms=0.012,
            speedup=0.58, before_kernel_ms=0.012, kernel_host_us=host_us,
            before_kernel_host_us=host_us / 1.23, change=device, host_change=host,
        )  # fmt: skip

    bound = row(61.0, same_device, slower_host)
    device_bound = row(12.0, same_device, slower_host)
    noisy = row(61.0, noisy_device, same_host)
    slower = row(61.0, slower_device, same_host)
    bench = BenchmarkResult(op="op", rows=[bound, device_bound, noisy, slower])
    judged = judged_rows(bench, 0.10)
    assert [j.verdict for j in judged] == [
        Verdict.same, Verdict.same, Verdict.noisy, Verdict.slower
    ]  # fmt: skip
    # Only a host-bound row carries its host change (shown, never judged).
    assert [j.host_change for j in judged] == [slower_host, None, same_host, same_host]
    cell = table_module._change_cell(judged[0])
    assert cell.startswith("device +0.0 %") and "· host +23.0 %" in cell
    assert SLOWER not in cell
    flagged = table_module._change_cell(judged[3])
    assert flagged.index(SLOWER) < flagged.index("· host")
    assert "too noisy" in table_module._change_cell(judged[2])
    note = performance_module._host_bound_note(bench)
    assert note is not None and "only the device's is judged" in note
    assert note.endswith("not the code.")  # a whole sentence, never cut off
    assert "host" not in table_module._change_cell(judged[1])
