"""The result comment of one (PR, operator, backend) and its commit status.

The comment is updated in place as the job goes from queued to its end; earlier runs of the
same pair stay under it, collapsed. Layout: headline, the commit/runner/device/duration/links
line, the environment, then accuracy, performance and, for errors, the failing step's log
tail. Everything is capped so the comment stays under GitHub's 65536-character limit: the
renderer tries ever smaller limits until it fits.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from service.render.failures import (
    LABEL,
    class_words,
    classes,
    failures_fail_gate,
    known,
    known_words,
    ordered,
)
from service.render.markdown import (
    ELLIPSIS,
    clip,
    code_span,
    details,
    duration,
    escape_text,
    link,
    log_block,
    one_line,
    plural,
    short_sha,
    utc,
)
from service.render.verdicts import (
    HOST_BOUND,
    Judged,
    Verdict,
    band_text,
    detectable,
    host_judged,
    is_host_bound,
    judged_rows,
    of,
    percent,
)
from service.render.views import CheckRunUpdate, JobView, StatusUpdate
from workflows.models import (
    AccuracyResult,
    BenchmarkResult,
    BenchmarkRow,
    JobResult,
    JobStatus,
    Proof,
    StepResult,
    StepStatus,
    TestFailure,
)

MAX_COMMENT_CHARS = 65536
COMMENT_BUDGET = 60000  # headroom: GitHub may count some characters (emoji) twice
MAX_STATUS_DESCRIPTION = 140
INTERPRETER_NOTE = "Timed under the Triton interpreter: not performance."
# A kernel slower than the framework's overall, beyond this, is a performance drop too.
NOISE = 0.10
SLOWER = "📉"  # next to the accuracy verdict: the performance got worse
FASTER = "📈"
NOISY = "〰️"
HOST_BOUND_SHOWN = 10

EMOJI = {
    JobStatus.queued: "⏳",
    JobStatus.running: "🏃",
    JobStatus.succeeded: "✅",
    JobStatus.failed: "❌",
    JobStatus.errored: "⚠️",
    JobStatus.timed_out: "⚠️",
    JobStatus.cancelled: "⛔",
    JobStatus.superseded: "⛔",
}
STATUS_STATE = {
    JobStatus.queued: "pending",
    JobStatus.running: "pending",
    JobStatus.succeeded: "success",
    JobStatus.failed: "failure",
    JobStatus.errored: "error",
    JobStatus.timed_out: "error",
    # Commit statuses know no "cancelled": a job stopped before its verdict says nothing
    # about the code, so it is neither a failure nor a success; the description says why.
    JobStatus.cancelled: "pending",
    JobStatus.superseded: "pending",
}


@dataclass(frozen=True)
class Limits:
    """How much of each list or log a comment shows."""

    failures: int
    message_chars: int
    traceback_lines: int
    traceback_chars: int
    log_lines: int
    log_chars: int
    rows: int
    skips: int
    history: int


LEVELS = (
    Limits(20, 500, 40, 3000, 60, 6000, 200, 30, 20),
    Limits(5, 300, 15, 1200, 30, 2500, 60, 10, 10),
    Limits(0, 200, 0, 0, 10, 800, 20, 5, 3),
)


def marker(op: str, backend: str) -> str:
    """The hidden first line by which the service finds the comment to update."""
    return f"<!-- ondemand:{op}:{backend} -->"


def render_comment(current: JobView, history: Sequence[JobView] = ()) -> str:
    """The one comment of (PR, op, backend): the current run, earlier runs collapsed."""
    earlier = sorted(
        (v for v in history if v.id != current.id), key=lambda v: (v.created_at, v.id), reverse=True
    )
    for limits in LEVELS:
        text = _comment(current, earlier, limits)
        if len(text) <= COMMENT_BUDGET:
            return text
    return _minimal_comment(current)


def summary(view: JobView) -> str:
    """The plain-text verdict after "op on backend:" (also the commit status description):
    the accuracy counts, then the geometric-mean speedup, the slowest row and the rows slower
    than on the merge base."""
    result = view.result
    status = view.status
    if status is JobStatus.queued:
        return _queue_text(view)
    if status is JobStatus.running:
        runner = f" on {view.runner_name}" if view.runner_name else ""
        attempt = f" (attempt {view.attempt})" if view.attempt > 1 else ""
        return f"running{runner}{attempt}{_progress_words(view)}"
    if result is not None and result.unknown_op:
        return f"no operator {view.op} in this commit"
    if status in (JobStatus.cancelled, JobStatus.superseded):
        why = view.reason or (result.error_message if result else None)
        return why or status.value
    if status in (JobStatus.errored, JobStatus.timed_out):
        found = classes(view)
        infra = "infrastructure failure · " if found is not None and found.infrastructure else ""
        return infra + _error_text(view)
    words = _counts(result.accuracy) if result and result.accuracy else status.value
    told = class_words(view)
    if told:
        words = f"{told} · {words}"
    speed = _speed_words(view) if result and view.bench else None
    text = f"{words} · {speed}" if speed else words
    if unproved(view):
        text = f"its {view.backend} specialization never ran · {text}"
    if gate_failed(view):  # first: the status description keeps 140 characters
        return f"regression gate failed · {text}"
    if regression_accepted(view):
        return f"regression accepted by @{view.accepted_by} · {text}"
    return text


def unproved(view: JobView) -> str | None:
    """Where the checkout holds the backend's specialization of the operator, when the tests
    ran and none of its proof lines was logged (what they tested is not it); else None."""
    return _unproved(view.result.accuracy if view.result is not None else None)


def _unproved(acc: AccuracyResult | None) -> str | None:
    if acc is None or acc.proof is None or acc.proof.lines or acc.passed + acc.failed == 0:
        return None
    return acc.proof.specialization


def compared(view: JobView) -> list[Judged]:
    """The rows compared with the merge base and their verdicts at the view's threshold
    (none under the interpreter, or with `--no-compare`)."""
    result = view.result
    if not view.bench or not view.compare or result is None or result.benchmark is None:
        return []
    if not result.benchmark.performance:
        return []
    return judged_rows(result.benchmark, view.threshold)


def slower_rows(view: JobView) -> list[Judged]:
    """Rows slower than on the merge base beyond the noise, slowest first."""
    return of(compared(view), Verdict.slower)


def gate_failed(view: JobView) -> bool:
    """The repository's gate fails the job: `gate: fail`, a significant regression, and no
    maintainer has accepted it (in a job that passed, or whose failures do not fail it)."""
    if view.gate != "fail" or view.accepted_by or not _tests_pass_gate(view):
        return False
    return bool(slower_rows(view))


def _tests_pass_gate(view: JobView) -> bool:
    """The tests' verdict does not fail the job: it passed, or its failures are of classes
    the repository does not gate on (`failures_fail_gate`)."""
    if view.status is JobStatus.succeeded:
        return True
    return view.status is JobStatus.failed and not failures_fail_gate(view)


def regression_accepted(view: JobView) -> bool:
    return bool(view.accepted_by) and view.gate == "fail" and bool(slower_rows(view))


def performance_dropped(view: JobView) -> bool:
    """The performance signal beside the verdict: a row slower than on the merge base, or a
    kernel slower than the reference overall (geometric mean below one, beyond the noise)."""
    result = view.result
    if not view.bench or result is None or result.benchmark is None:
        return False
    bench = result.benchmark
    if not bench.performance or not bench.rows:
        return False
    if slower_rows(view):
        return True
    _, geo = _mean(bench)
    return geo is not None and geo < 1 - NOISE


def _row_label(row: BenchmarkRow) -> str:
    return f"{row.dtype} [{', '.join(str(n) for n in row.size)}]"


def _speed_words(view: JobView) -> str | None:
    """`geomean 0.82x · slowest 0.09x (float16 [1, 2]) · 📉 3 rows slower beyond noise (worst
    float32 [4]: +25.0 % ±2.0 %)`; under the interpreter, that only latencies were taken."""
    bench = view.result.benchmark if view.result else None
    if bench is None or not bench.rows:
        return None
    if not bench.performance:
        return "latencies only (Triton interpreter)"
    _, geo = _mean(bench)
    parts = []
    if geo is not None:
        parts.append(f"geomean {geo:.2f}x")
    slowest = min(bench.rows, key=lambda r: r.speedup)
    if len(bench.rows) > 1:
        parts.append(f"slowest {slowest.speedup:.2f}x ({_row_label(slowest)})")
    change = _change_words(compared(view))
    if change:
        parts.append(change)
    return " · ".join(parts) or None


def _change_words(judged: Sequence[Judged]) -> str | None:
    """Before → after in a few words: rows slower and faster beyond noise, or no significant
    change; how many were too noisy to judge."""
    if not judged:
        return None
    slower, faster = of(judged, Verdict.slower), of(judged, Verdict.faster)
    noisy = of(judged, Verdict.noisy)
    words = []
    if slower:
        worst = slower[0]
        words.append(
            f"{SLOWER} {plural(len(slower), 'row')} slower beyond noise (worst "
            f"{_row_label(worst.row)}: {_deciding_text(worst)})"
        )
    if faster:
        best = faster[0]
        words.append(
            f"{FASTER} {plural(len(faster), 'row')} faster (best {_row_label(best.row)}: "
            f"{_deciding_text(best)})"
        )
    if not slower and not faster:
        words.append("no significant change" if len(noisy) < len(judged) else "")
    if noisy:
        words.append(f"{len(noisy)} of {plural(len(judged), 'row')} too noisy to judge")
    return " · ".join(w for w in words if w)


def _deciding_text(judged: Judged) -> str:
    """`+25.0 % ±2.0 %`, or `host +21.0 % ±6.0 %` where the host time alone gave the verdict."""
    change = judged.deciding
    text = f"{percent(change)} {band_text(change)}"
    return f"host {text}" if judged.on_host else text


def _progress_words(view: JobView) -> str:
    """`: accuracy, 12/411 tests, 1 failed` from the runner's last progress."""
    progress = view.progress
    if progress is None:
        return ""
    words = []
    if progress.step:
        words.append(progress.step)
    if progress.tests_total:
        words.append(f"{progress.tests_done}/{progress.tests_total} tests")
    elif progress.tests_done:
        words.append(plural(progress.tests_done, "test") + " done")
    if progress.failed:
        words.append(f"{progress.failed} failed")
    return ": " + ", ".join(words) if words else ""


def headline(view: JobView) -> str:
    """`⏳ `op` on `backend`: queued, …` as one markdown line."""
    unknown = view.result is not None and view.result.unknown_op and view.status.final
    emoji = "⚠️" if unknown else EMOJI[view.status]
    if view.status is JobStatus.succeeded and unproved(view):
        emoji = "⚠️"
    if view.status is JobStatus.failed and not failures_fail_gate(view):
        emoji = "⚠️"  # it failed, of nothing the repository gates on
    if gate_failed(view):
        emoji = EMOJI[JobStatus.failed]
    if performance_dropped(view):
        emoji += f" {SLOWER}"
    elif of(compared(view), Verdict.faster):
        emoji += f" {FASTER}"
    return f"{emoji} `{view.op}` on `{view.backend}`: {escape_text(summary(view), 400)}"


def render_status(view: JobView) -> StatusUpdate:
    """The commit status of a job: context `ondemand/<op>:<backend>`, target the job page."""
    unknown = view.result is not None and view.result.unknown_op and view.status.final
    state = "error" if unknown else STATUS_STATE[view.status]
    if view.status is JobStatus.failed and not unknown and not failures_fail_gate(view):
        state = "success"  # as an accepted regression: nothing the repository gates on
    if gate_failed(view):
        state = "failure"
    return StatusUpdate(
        state=state,
        description=one_line(summary(view), MAX_STATUS_DESCRIPTION),
        context=f"ondemand/{view.op}:{view.backend}",
        target_url=view.job_url,
    )


CHECK_CONCLUSION = {
    JobStatus.succeeded: "success",
    JobStatus.failed: "failure",
    JobStatus.errored: "failure",
    JobStatus.timed_out: "timed_out",
    JobStatus.cancelled: "cancelled",  # grey, not red: nothing was said about the code
    JobStatus.superseded: "neutral",
}
MAX_CHECK_TITLE = 200
MAX_CHECK_OUTPUT = 65535  # GitHub's limit on a check run's summary and on its text


def check_state(view: JobView) -> tuple[str, str | None]:
    """A job's check run: its status (`queued`, `in_progress`, `completed`) and, once
    completed, its conclusion; a cancel or a supersede is `cancelled` / `neutral`."""
    if view.status is JobStatus.queued:
        return "queued", None
    if view.status is JobStatus.running:
        return "in_progress", None
    conclusion = CHECK_CONCLUSION[view.status]
    if view.status is JobStatus.failed and not failures_fail_gate(view):
        conclusion = "neutral"  # failures of classes the repository does not gate on
    if gate_failed(view):
        conclusion = "failure"
    elif regression_accepted(view):
        conclusion = "neutral"
    return "completed", conclusion


def render_check(view: JobView) -> CheckRunUpdate:
    """The check run of a job when the service is a GitHub App: named like the commit
    status, its output the report (the headline and facts as the summary, the whole report
    with its table as the text)."""
    status, conclusion = check_state(view)
    report = render_comment(view)
    body = report.split("\n", 1)[1].lstrip("\n")  # without the hidden marker
    summary_parts = [f"### {headline(view)}", _facts(view)]
    if view.status is JobStatus.running:
        summary_parts.append(_progress(view, LEVELS[1]))
    return CheckRunUpdate(
        name=f"ondemand/{view.op}:{view.backend}",
        head_sha=view.sha,
        external_id=str(view.id),
        details_url=view.job_url,
        status=status,
        conclusion=conclusion,
        title=one_line(summary(view), MAX_CHECK_TITLE),
        summary=clip("\n\n".join(p for p in summary_parts if p), MAX_CHECK_OUTPUT),
        text=clip(body, MAX_CHECK_OUTPUT),
    )


def _comment(view: JobView, earlier: Sequence[JobView], limits: Limits) -> str:
    parts = [marker(view.op, view.backend), f"### {headline(view)}", _facts(view)]
    result = view.result
    if view.status is JobStatus.running:
        parts.append(_progress(view, limits))
    if view.status is JobStatus.superseded:
        parts.append(
            "The pull request moved on before this job started: new code needs a new `/test`."
        )
    if result is not None:
        parts += _environment(result)
        parts += _steps(result)
        if result.unknown_op:
            parts.append(_unknown_op(view, result))
        else:
            parts += _accuracy(result.accuracy, view, limits)
            parts += _performance(result.benchmark, view, limits)
            parts += _error(view, result, limits)
    elif view.status in (JobStatus.errored, JobStatus.timed_out) and view.reason:
        parts.append(f"**Error:** {escape_text(view.reason, limits.message_chars)}")
    if earlier:
        parts.append(_history(earlier, limits))
    return "\n\n".join(p for p in parts if p) + "\n"


def _minimal_comment(view: JobView) -> str:
    """The last resort when even the smallest limits do not fit: headline and links."""
    return (
        "\n\n".join(
            [
                marker(view.op, view.backend),
                f"### {headline(view)}",
                _facts(view),
                "The full report is too long for a comment: see the "
                f"{link('job page', view.job_url)} and the {link('full log', view.log_url)}.",
            ]
        )
        + "\n"
    )


def _facts(view: JobView) -> str:
    """Commit, runner, device, duration, attempt and the links, on one line."""
    result = view.result
    env = result.environment if result else None
    facts = [f"Commit `{escape_text(short_sha(view.sha), 40)}`"]
    runner = view.runner_name or (env.runner_name if env else None)
    if runner:
        facts.append(f"runner {code_span(runner, 80)}")
    device = (env.device_name if env else None) or (
        result.benchmark.device if result and result.benchmark else None
    )
    if device:
        facts.append(escape_text(device, 80))
    seconds = result.duration_s if result else None
    if seconds is None and view.started_at and view.finished_at:
        seconds = (view.finished_at - view.started_at).total_seconds()
    if seconds is not None:
        facts.append(duration(seconds))
    if view.attempt > 1:
        facts.append(f"attempt {view.attempt}")
    facts.append(link(f"job #{view.id}", view.job_url))
    log_label = "live log" if view.status is JobStatus.running else "full log"
    if view.status is not JobStatus.queued:
        facts.append(link(log_label, view.log_url))
    return " · ".join(facts)


def _progress(view: JobView, limits: Limits) -> str:
    """While a job runs: its step, tests done of the total, the failures so far (their ids),
    the time since it started and how long this operator's jobs usually take here."""
    progress = view.progress
    lines = []
    if progress is not None and progress.step:
        lines.append(f"Step {code_span(progress.step, 100)}")
    if progress is not None and (progress.tests_total or progress.tests_done):
        done = progress.tests_done
        line = (
            f"**{done}/{progress.tests_total} tests**"
            if progress.tests_total
            else (f"**{plural(done, 'test')}**")
        )
        line += f", {progress.failed} failed so far" if progress.failed else ", none failed so far"
        lines.append(line)
    timing = []
    if view.started_at is not None and view.now is not None:
        timing.append(f"running for {duration((view.now - view.started_at).total_seconds())}")
    if view.estimate_s is not None:
        timing.append(f"usually takes {duration(view.estimate_s)}")
    if timing:
        lines.append(" · ".join(timing))
    text = " · ".join(lines)
    if progress is not None and progress.failures:
        shown = progress.failures[: max(limits.failures, 3)]
        ids = "\n".join(f"- {code_span(test_id, 250)}" for test_id in shown)
        more = progress.failed - len(shown)
        if more > 0:
            ids += f"\n- {ELLIPSIS} {more} more"
        text += f"\n\n**Failed so far**\n{ids}"
    return text


def _environment(result: JobResult) -> list[str]:
    env = result.environment
    fields = [
        ("device", env.device_name),
        ("vendor", env.vendor),
        ("driver", env.driver),
        ("torch", env.torch),
        ("triton", env.triton),
        ("torch_musa", env.torch_musa),
    ]
    shown = [f"{name} {code_span(value, 80)}" for name, value in fields if value]
    # The host's packages used where the repository pins other versions: said, not hidden.
    shown += [escape_text(note, 120) for note in env.notes[:10]]
    return [f"**Environment:** {' · '.join(shown)}"] if shown else []


_STEP_MARK = {
    StepStatus.succeeded: "✅",
    StepStatus.failed: "❌",
    StepStatus.errored: "⚠️",
    StepStatus.timed_out: "⌛",
    StepStatus.cancelled: "⛔",
    StepStatus.skipped: "⏭️",
}


def _steps(result: JobResult) -> list[str]:
    if not result.steps:
        return []
    shown = [
        f"{_STEP_MARK[s.status]} {code_span(s.name, 60)} {duration(s.duration_s)}"
        for s in result.steps[:20]
    ]
    more = len(result.steps) - len(shown)
    if more > 0:
        shown.append(f"{ELLIPSIS} {more} more")
    return [f"**Steps:** {' · '.join(shown)}"]


def _counts(acc: AccuracyResult) -> str:
    """`2 failed, 1 error, 67 passed, 3 skipped` (zero counts left out but for passed)."""
    words = []
    if acc.failed:
        words.append(f"{acc.failed} failed")
    if acc.errors:
        words.append(plural(acc.errors, "error"))
    words.append(f"{acc.passed} passed")
    if acc.skipped:
        words.append(f"{acc.skipped} skipped")
    return ", ".join(words)


def _mean(bench: BenchmarkResult) -> tuple[float | None, float | None]:
    arith, geo = bench.arithmetic_mean_speedup, bench.geometric_mean_speedup
    if arith is None or geo is None:
        computed = BenchmarkResult.means([r.speedup for r in bench.rows])
        arith = arith if arith is not None else computed[0]
        geo = geo if geo is not None else computed[1]
    return arith, geo


def _accuracy(acc: AccuracyResult | None, view: JobView, limits: Limits) -> list[str]:
    if acc is None:
        return []
    parts = ["#### Accuracy"]
    line = f"**{_counts(acc)}** of {plural(acc.total, 'test')}"
    if acc.implementation:
        line += f" · implementation {code_span(acc.implementation, 150)}"
    parts.append(line)
    if acc.proof is not None:
        parts.append(_proof(acc.proof, _unproved(acc), limits))
    if acc.failures:
        parts.append(f"**Failures ({len(acc.failures)})**")
        told = _classified_note(view)
        if told:
            parts.append(told)
        for failure in _in_class_order(acc, view)[: limits.failures]:
            first = code_span(failure.message, limits.message_chars) if failure.message else ""
            line = f"{code_span(failure.test_id, 250)}" + (f": {first}" if first else "")
            parts.append(line + _class_line(view, failure.test_id, limits))
            if failure.traceback_tail and limits.traceback_lines > 0:
                block = log_block(
                    failure.traceback_tail, limits.traceback_lines, limits.traceback_chars
                )
                parts.append(details("traceback", block))
        more = len(acc.failures) - min(len(acc.failures), limits.failures)
        if more > 0:
            parts.append(
                f"{ELLIPSIS} {more} more {'failure' if more == 1 else 'failures'}: see the "
                f"{link('full log', view.log_url)}."
            )
    elif acc.failed or acc.errors:
        parts.append(f"No failure details were reported: see the {link('full log', view.log_url)}.")
    if acc.skips:
        lines = [
            f"- {skip.count} × {escape_text(skip.reason, limits.message_chars)}"
            for skip in acc.skips[: limits.skips]
        ]
        more = len(acc.skips) - min(len(acc.skips), limits.skips)
        if more > 0:
            lines.append(f"- {ELLIPSIS} {more} more skip reasons")
        parts.append("**Skipped**\n" + "\n".join(lines))
    return parts


def _classified_note(view: JobView) -> str | None:
    """How the failures were told apart and which classes fail the gate, in one paragraph."""
    found = classes(view)
    if found is None or not found.tests:
        return None
    head = max((t.reruns for t in found.tests), default=0)
    how = f"Each failing test was re-run by node id on this commit ({plural(head, 'time')})"
    if found.merge_base:
        how += f" and on the merge base `{escape_text(short_sha(found.merge_base), 40)}`"
    how += f", in {duration(found.duration_s)}."
    gate = [LABEL[c] for c in found.gate] or ["nothing"]
    verdict = "fail" if failures_fail_gate(view) else "do not fail"
    return (
        f"{how} **{escape_text(class_words(view) or '', 300)}**: these failures {verdict} "
        f"this check (this repository's `failures.gate`: {', '.join(gate)})."
    )


def _in_class_order(acc: AccuracyResult, view: JobView) -> list[TestFailure]:
    """The failures, those of gating classes first, where they were classified."""
    found = classes(view)
    if found is None or not found.tests:
        return list(acc.failures)
    rank = {t.test_id: i for i, t in enumerate(ordered(found.tests))}
    return sorted(acc.failures, key=lambda f: rank.get(f.test_id, len(rank)))


def _class_line(view: JobView, test_id: str, limits: Limits) -> str:
    """` — **flaky**: passed 2 of 3 re-runs · known flaky: 3 of 10 recent jobs`."""
    found = classes(view)
    entry = next((t for t in found.tests if t.test_id == test_id), None) if found else None
    words = []
    if entry is not None:
        why = escape_text(entry.why, limits.message_chars)
        words.append(f"**{LABEL[entry.failure_class]}**: {why}")
    flaky = known(view, test_id)
    if flaky is not None:
        words.append(known_words(flaky))
    return " — " + " · ".join(words) if words else ""


def _proof(proof: Proof, unproved: str | None, limits: Limits) -> str:
    """The proof-log line: which paths the specialization logged, and how often; a warning
    where a specialization the checkout holds (`unproved`) logged none."""
    prefix = code_span(proof.prefix, 100)
    if unproved:
        return (
            f"⚠️ Proof log: {code_span(unproved, 200)} specializes this operator, "
            f"yet no {prefix} line was logged: these tests and timings are not of it (it was "
            "not chosen, or it does not log)."
        )
    if not proof.lines:
        return f"Proof log: no {prefix} line was logged, so no implementation that logs it ran."
    shown = [
        f"{code_span(line.message[len(proof.prefix) :].strip() or line.message, 150)}"
        f" × {line.count}"
        for line in proof.lines[: limits.skips]
    ]
    more = len(proof.lines) - len(shown)
    tail = f" · {ELLIPSIS} {more} more" if more > 0 else ""
    return f"Proof log {prefix}: " + " · ".join(shown) + tail


def _performance(bench: BenchmarkResult | None, view: JobView, limits: Limits) -> list[str]:
    if not view.bench:
        return ["#### Performance", "Benchmark not run (`--no-bench`)."]
    if bench is None:
        if view.status in (JobStatus.succeeded, JobStatus.failed):
            return ["#### Performance", "No benchmark result was reported."]
        return []
    parts = ["#### Performance"]
    if not bench.performance:
        parts.append(f"_{INTERPRETER_NOTE} Latencies only; no speedups._")
    judged = compared(view)
    if judged:
        parts.append(_comparison_note(view, bench, judged))
    if bench.rows:
        verdicts = {id(j.row): j for j in judged}
        parts.append(_table(bench.rows, limits, view.compare, bench.performance, verdicts))
        bound = _host_bound_note(bench) if bench.performance else None
        if bound:
            parts.append(bound)
    else:
        parts.append("The benchmark reported no rows.")
    arith, geo = _mean(bench)
    if bench.performance and geo is not None:
        means = f"Geometric mean speedup: **{geo:.2f}x**"
        interval = bench.geometric_mean_rounds
        if interval is not None and interval.low is not None and interval.high is not None:
            means += f" (95 % {interval.low:.2f}–{interval.high:.2f}x)"
        if bench.rows:
            slowest = min(bench.rows, key=lambda r: r.speedup)
            label = escape_text(_row_label(slowest), 200)
            means += f" · slowest row: **{slowest.speedup:.2f}x** ({label})"
        parts.append(means)
    if bench.performance and arith is not None:
        footer = f"Arithmetic mean speedup: {arith:.2f}x"
        if view.compare and bench.before_arithmetic_mean_speedup is not None:
            footer += f" (before: {bench.before_arithmetic_mean_speedup:.2f}x)"
        parts.append(f"<sub>{footer}, as FlagGems reports it.</sub>")
    if not view.compare:
        parts.append("The base branch was not compared (`--no-compare`).")
    return parts


def _before(view: JobView) -> str:
    """What "before" is: the merge base, or the commit `/test ... vs REF` named."""
    if view.exact_base and view.base_ref and view.base_sha:
        return f"{code_span(view.base_ref, 100)} ({code_span(short_sha(view.base_sha), 40)})"
    return "the merge base"


def _comparison_note(view: JobView, bench: BenchmarkResult, judged: Sequence[Judged]) -> str:
    """How before → after was measured and judged, what it found, and the gate."""
    rounds = sorted(j.change.rounds for j in judged)
    span = f"{rounds[0]}" if rounds[0] == rounds[-1] else f"{rounds[0]}–{rounds[-1]}"
    how = {
        "in_process": "in one process, their rounds interleaved row by row",
        "processes": "in separate processes of each, taken in turn",
        "workers": "in one process per tree kept across rounds, taken in turn",
    }.get(bench.compare_mode or "", "once each, in separate processes")
    threshold = f"{view.threshold * 100:g} %"
    lines = [
        f"**Before → after:** {_before(view)} and this commit timed {how} ({span} rounds a "
        f"row). A row is slower or faster only when the whole 95 % interval of its change "
        f"lies beyond ±{threshold}; a row whose interval is wider than that is too noisy to "
        f"judge."
    ]
    found = _change_words(judged)
    if found:
        lines.append(f"**{escape_text(found, 400)}**")
    short = [j for j in judged if j.verdict is Verdict.noisy and j.band is None]
    if short and bench.compare_mode:  # taken in rounds (not once each, as an older job was)
        fewest = min(j.change.rounds for j in short)
        lines.append(
            f"{plural(len(short), 'row')} had too few rounds (as few as {fewest}) to bound "
            f"{'its' if len(short) == 1 else 'their'} change at 95 %: the comparison "
            f"stopped first (its time, `compare.budget_s`, or its rounds, `compare.max_rounds`, "
            f"in the workflow), not for the code's noise."
        )
    host = _host_judged_note(view, judged)
    if host:
        lines.append(host)
    if gate_failed(view):
        lines.append(
            f"**Regression gate: failed.** This repository's gate fails a significant "
            f"regression; a maintainer can accept it with `/test accept-regression {view.op}`."
        )
    elif regression_accepted(view):
        who = escape_text(view.accepted_by or "", 40)
        lines.append(f"Regression gate: the regression was accepted by @{who}.")
    return "\n\n".join(lines)


def _host_judged_note(view: JobView, judged: Sequence[Judged]) -> str | None:
    """Which rows were judged on their host time too, how, and what it found: the rows
    flagged on it, those too noisy, and the smallest host change each could detect."""
    on_host = host_judged(judged)
    if not on_host:
        return None
    processes = sorted({j.host_change.rounds for j in on_host if j.host_change is not None})
    span = f"{processes[0]}" if processes[0] == processes[-1] else f"{processes[0]}–{processes[-1]}"
    threshold = f"{view.threshold * 100:g} %"
    text = (
        f"**Host time:** {plural(len(on_host), 'host-bound row')} (host time per call above "
        f"{HOST_BOUND:g}× the device time) {'was' if len(on_host) == 1 else 'were'} also judged "
        f"on {'its' if len(on_host) == 1 else 'their'} host time, timed in {span} processes "
        f"per tree: each process is one sample, since two processes of the same code differ "
        f"in host time for their whole lives, so the interval spans that spread. A host change "
        f"flags its row when its whole 95 % interval lies beyond ±{threshold}."
    )
    flagged = [j for j in on_host if j.host_verdict in (Verdict.slower, Verdict.faster)]
    noisy = [j for j in on_host if j.host_verdict is Verdict.noisy]
    found = []
    if flagged:
        found.append(f"{len(flagged)} flagged on host time")
    if noisy:
        found.append(
            f"{len(noisy)} host too noisy to judge (the processes disagreed by more than "
            f"±{threshold})"
        )
    detect = [
        d for j in on_host if j.host_change and (d := detectable(j.host_change, view.threshold))
    ]
    if detect:
        low, high = min(detect), max(detect)
        each = (
            f"+{low * 100:.1f} %" if low == high else f"+{low * 100:.1f} % to +{high * 100:.1f} %"
        )
        found.append(f"smallest detectable host slowdown {each}")
    if found:
        said = "; ".join(found)
        text += f" {said[:1].upper()}{said[1:]}."
    return text


def _table(
    rows: Sequence[BenchmarkRow],
    limits: Limits,
    compare: bool,
    performance: bool = True,
    verdicts: dict[int, Judged] | None = None,
) -> str:
    """The seed's table (`dtype | Size | Torch Latency (ms) | Kernel Latency (ms) | Speedup`,
    the output size in the Size cell as `in → out`), then GB/s and % of copy bandwidth when
    measured on a device; with the merge base compared, the kernel latency before → after
    and, on a device, the change with its noise band (📉 slower, 📈 faster beyond it, 〰️ too
    noisy to judge) and the rounds it took. Under the interpreter the speedup column is left
    out: its latencies say nothing of a device."""
    verdicts = verdicts or {}
    has_gbps = performance and any(r.gbps is not None for r in rows)
    has_frac = performance and any(r.bandwidth_fraction is not None for r in rows)
    has_before = compare and any(r.before_kernel_ms is not None for r in rows)
    has_change = has_before and bool(verdicts)
    header = ["dtype", "Size", "Torch Latency (ms)", "Kernel Latency (ms)"]
    if has_before:
        header[-1] = "Kernel Latency (ms) before → after"
    if has_change:
        header += ["Change (95 %)", "Rounds"]
    if performance:
        header.append("Speedup")
    if has_gbps:
        header.append("GB/s")
    if has_frac:
        header.append("% of copy bandwidth")
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in rows[: limits.rows]:
        size = _shape(row.size)
        if row.output_size:
            size += f" → {_shape(row.output_size)}"
        cells = [escape_text(row.dtype, 40), size, _ms(row.reference_ms)]
        before = row.before_kernel_ms if has_before else None
        cells.append(_arrow(before, row.kernel_ms, _ms))
        if has_change:
            judged = verdicts.get(id(row))
            cells += [_change_cell(judged), str(judged.change.rounds) if judged else "–"]
        if performance:
            cells.append(_speedup_cell(row))
        if has_gbps:
            cells.append(f"{row.gbps:.1f}" if row.gbps is not None else "–")
        if has_frac:
            frac = row.bandwidth_fraction
            cells.append(f"{frac * 100:.0f}%" if frac is not None else "–")
        lines.append("| " + " | ".join(cells) + " |")
    more = len(rows) - min(len(rows), limits.rows)
    table = "\n".join(lines)
    if more > 0:
        table += f"\n\n{ELLIPSIS} {more} more rows on the job page."
    return table


_MARK = {Verdict.slower: f" {SLOWER}", Verdict.faster: f" {FASTER}", Verdict.same: ""}


def _change_cell(judged: Judged | None) -> str:
    """`+23.1 % ±2.0 % 📉`, `-0.4 % ±1.1 %`, `+8.0 % ±31.0 % 〰️ too noisy`; a host-bound
    row's host change beside its device change, each with its own mark where processes
    judged the host (`device +0.2 % ±0.9 % · host +21.0 % ±6.0 % 📉`, `… · host +3.0 %
    ±24.0 % 〰️ host too noisy`), bare where it is only shown (one process a side)."""
    if judged is None:
        return "–"
    text = f"{percent(judged.change)} {band_text(judged.change)}" + _mark(judged.device_verdict)
    if judged.host_change is None:
        return text
    host = judged.host_change
    shown = f"device {text} · host {percent(host)} {band_text(host)}"
    if judged.host_verdict is Verdict.noisy:
        return f"{shown} {NOISY} host too noisy"
    return shown + (_mark(judged.host_verdict) if judged.host_verdict is not None else "")


def _mark(verdict: Verdict) -> str:
    return f" {NOISY} too noisy" if verdict is Verdict.noisy else _MARK[verdict]


def _speedup_cell(row: BenchmarkRow) -> str:
    """`1.920x`, with the 95 % interval of its median over rounds where known:
    `1.920x (1.85–2.01)`."""
    text = _x(row.speedup)
    if row.speedup_low is not None and row.speedup_high is not None:
        text += f" ({row.speedup_low:.2f}–{row.speedup_high:.2f})"
    return text


def host_bound(rows: Sequence[BenchmarkRow], ratio: float = HOST_BOUND) -> list[BenchmarkRow]:
    """The rows whose kernel's host time per call exceeds its device time (the kernel
    latency) by more than `ratio`, most host-bound first."""
    bound = [row for row in rows if is_host_bound(row.kernel_host_us, row.kernel_ms, ratio)]
    return sorted(bound, key=lambda r: (r.kernel_host_us or 0) / 1000 / r.kernel_ms, reverse=True)


def _host_bound_note(bench: BenchmarkResult) -> str | None:
    """Below the table: the host-bound rows with both figures, a few at most."""
    bound = host_bound(bench.rows)
    if not bound:
        return None
    shown = []
    for row in bound[:HOST_BOUND_SHOWN]:
        size = _shape(row.size)
        if row.output_size:
            size += f" → {_shape(row.output_size)}"
        host = _us(row.kernel_host_us or 0.0)
        shown.append(
            f"{escape_text(row.dtype, 40)} {size}: host {host}, device {_us(row.kernel_ms * 1000)}"
        )
    more = len(bound) - len(shown)
    tail = f"; {ELLIPSIS} {more} more" if more > 0 else ""
    note = "Host-bound rows (host time per call above device time): " + "; ".join(shown) + tail
    if any(row.host_process_change is not None for row in bound):
        note += (
            ". Their change shows the host time's beside the device time's, and both are"
            " judged: the host time's over processes (above)."
        )
    elif any(row.host_change is not None for row in bound):
        note += (
            ". Their change shows the host time's beside the device time's, and only the"
            " device's is judged: each side's host time comes from one process, and two"
            " processes of the same code differ in host time for their whole lives, so a host"
            " verdict would judge the processes, not the code."
        )
    return note


def _us(value: float) -> str:
    return f"{value:,.0f} µs" if value >= 10 else f"{value:.1f} µs"


def _shape(size: Sequence[int]) -> str:
    return clip(", ".join(str(n) for n in size), 60)


def _ms(value: float) -> str:
    return f"{value:.6f}"


def _x(value: float) -> str:
    return f"{value:.3f}x"


def _arrow(before: float | None, after: float, fmt: Callable[[float], str]) -> str:
    return f"{fmt(before)} → {fmt(after)}" if before is not None else fmt(after)


def _failed_step(result: JobResult) -> StepResult | None:
    """The step the runner named, or else the first that did not succeed."""
    if result.error_step:
        for step in result.steps:
            if step.name == result.error_step:
                return step
    bad = (StepStatus.errored, StepStatus.timed_out, StepStatus.failed)
    return next((s for s in result.steps if s.status in bad), None)


def _error(view: JobView, result: JobResult, limits: Limits) -> list[str]:
    """For errored and timed-out jobs, and failed ones without failure details: the step
    that failed, its exit status and the last lines of its log."""
    structured = result.accuracy is not None and bool(result.accuracy.failures)
    if view.status is JobStatus.failed and structured:
        return []
    if view.status not in (JobStatus.errored, JobStatus.timed_out, JobStatus.failed):
        return []
    step = _failed_step(result)
    parts = ["#### Error" if view.status is not JobStatus.failed else "#### Failed step"]
    name = result.error_step or (step.name if step else None)
    what = f"Step {code_span(name, 60)}" if name else "The job"
    verbs = {JobStatus.timed_out: "timed out", JobStatus.errored: "errored"}
    line = f"{what} {verbs.get(view.status, 'failed')}"
    if step is not None and step.exit_code is not None:
        line += f" with exit status {step.exit_code}"
    message = result.error_message or (step.message if step else None) or view.reason
    if message:
        line += f": {escape_text(message, limits.message_chars)}"
    parts.append(line + ("" if line.endswith(".") else "."))
    if step is not None and step.log_tail:
        parts.append(log_block(step.log_tail, limits.log_lines, limits.log_chars))
    return parts


def _unknown_op(view: JobView, result: JobResult) -> str:
    text = f"No test in commit `{short_sha(view.sha)}` is marked `{view.op}`"
    if result.close_matches:
        matches = ", ".join(code_span(m, 64) for m in result.close_matches[:5])
        return f"{text}. Close matches: {matches}."
    return f"{text}, and no operator name is close to it."


def _history(earlier: Sequence[JobView], limits: Limits) -> str:
    lines = [
        f"- {headline(v)} · commit `{escape_text(short_sha(v.sha), 40)}` · "
        f"{utc(v.created_at)} · {link(f'job #{v.id}', v.job_url)}"
        for v in earlier[: max(limits.history, 1)]
    ]
    more = len(earlier) - len(lines)
    if more > 0:
        lines.append(f"- {ELLIPSIS} {more} older")
    return details(f"Earlier runs ({len(earlier)})", "\n".join(lines))


def _queue_text(view: JobView) -> str:
    backend = view.backend
    # A requeued attempt says why ("runner-a stopped (SIGTERM); requeued") before where it waits.
    again = f"{view.reason} (attempt {view.attempt}): " if view.attempt > 1 and view.reason else ""
    if view.runners_online <= 0:
        return f"{again}no runner online for {backend}: the job waits"
    runners = plural(view.runners_online, "runner")
    if view.queue_position is not None:
        return f"{again}queued, position {view.queue_position} on {backend} ({runners} online)"
    return f"{again}queued on {backend} ({runners} online)"


def _error_text(view: JobView) -> str:
    result = view.result
    verb = "timed out" if view.status is JobStatus.timed_out else "errored"
    if result is None:
        return f"{verb}: {view.reason}" if view.reason else verb
    step = _failed_step(result)
    name = result.error_step or (step.name if step else None)
    text = f"{verb} in step {name}" if name else verb
    if step is not None and step.exit_code is not None:
        text += f" (exit {step.exit_code})"
    why = result.error_message or view.reason
    return f"{text}: {why}" if why else text
