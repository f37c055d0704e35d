"""The report's performance section: how before → after was measured and judged, the table
(`table`), the host-bound rows, and the mean speedups."""

from __future__ import annotations

from collections.abc import Sequence

from report.gate import compared, gate_failed, regression_accepted, speedup_means
from report.limits import Limits
from report.markdown import ELLIPSIS, code_span, escape_text, plural, short_sha
from report.summary import change_words
from report.table import render_table
from report.text import micros, row_label, size_text
from report.verdicts import HOST_BOUND, Judged, Verdict, detectable, host_judged, is_host_bound
from report.views import JobView
from workflows.models import BenchmarkResult, BenchmarkRow, JobStatus

INTERPRETER_NOTE = "Timed under the Triton interpreter: not performance."


HOST_BOUND_SHOWN = 10


def performance_section(bench: BenchmarkResult | None, view: JobView, limits: Limits) -> list[str]:
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
        parts.append(render_table(bench.rows, limits, view.compare, bench.performance, verdicts))
        bound = _host_bound_note(bench) if bench.performance else None
        if bound:
            parts.append(bound)
    else:
        parts.append("The benchmark reported no rows.")
    arith, geo = speedup_means(bench)
    if bench.performance and geo is not None:
        means = f"Geometric mean speedup: **{geo:.2f}x**"
        interval = bench.geometric_mean_rounds
        if interval is not None and interval.low is not None and interval.high is not None:
            means += f" (95 % {interval.low:.2f}–{interval.high:.2f}x)"
        if bench.rows:
            slowest = min(bench.rows, key=lambda r: r.speedup)
            label = escape_text(row_label(slowest), 200)
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
    found = change_words(judged)
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
        host, device = micros(row.kernel_host_us or 0.0), micros(row.kernel_ms * 1000)
        shown.append(f"{escape_text(row.dtype, 40)} {size_text(row)}: host {host}, device {device}")
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
