"""A job's verdict in one line: the plain words after "op on backend:" (`summary`, also the
commit status's description and the check run's title) and the headline with its emoji
(`headline`): the state, the accuracy counts, the failures' classes, the speed, and what the
gates decided."""

from __future__ import annotations

from collections.abc import Sequence

from report.failures import class_words, classes
from report.gate import (
    compared,
    failures_fail_gate,
    gate_failed,
    performance_dropped,
    regression_accepted,
    speedup_means,
)
from report.markdown import escape_text, plural
from report.text import FASTER, SLOWER, counts, row_label
from report.verdicts import Judged, Verdict, band_text, of, percent
from report.views import JobView
from workflows.models import AccuracyResult, JobResult, JobStatus, StepResult, StepStatus

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
    words = counts(result.accuracy) if result and result.accuracy else status.value
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
    return unproved_in(view.result.accuracy if view.result is not None else None)


def unproved_in(acc: AccuracyResult | None) -> str | None:
    if acc is None or acc.proof is None or acc.proof.lines or acc.passed + acc.failed == 0:
        return None
    return acc.proof.specialization


def _speed_words(view: JobView) -> str | None:
    """`geomean 0.82x · slowest 0.09x (float16 [1, 2]) · 📉 3 rows slower beyond noise (worst
    float32 [4]: +25.0 % ±2.0 %)`; under the interpreter, that only latencies were taken."""
    bench = view.result.benchmark if view.result else None
    if bench is None or not bench.rows:
        return None
    if not bench.performance:
        return "latencies only (Triton interpreter)"
    _, geo = speedup_means(bench)
    parts = []
    if geo is not None:
        parts.append(f"geomean {geo:.2f}x")
    slowest = min(bench.rows, key=lambda r: r.speedup)
    if len(bench.rows) > 1:
        parts.append(f"slowest {slowest.speedup:.2f}x ({row_label(slowest)})")
    change = change_words(compared(view))
    if change:
        parts.append(change)
    return " · ".join(parts) or None


def change_words(judged: Sequence[Judged]) -> str | None:
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
            f"{row_label(worst.row)}: {_deciding_text(worst)})"
        )
    if faster:
        best = faster[0]
        words.append(
            f"{FASTER} {plural(len(faster), 'row')} faster (best {row_label(best.row)}: "
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


def failed_step(result: JobResult) -> StepResult | None:
    """The step the runner named, or else the first that did not succeed."""
    if result.error_step:
        for step in result.steps:
            if step.name == result.error_step:
                return step
    bad = (StepStatus.errored, StepStatus.timed_out, StepStatus.failed)
    return next((s for s in result.steps if s.status in bad), None)


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
    step = failed_step(result)
    name = result.error_step or (step.name if step else None)
    text = f"{verb} in step {name}" if name else verb
    if step is not None and step.exit_code is not None:
        text += f" (exit {step.exit_code})"
    why = result.error_message or view.reason
    return f"{text}: {why}" if why else text
