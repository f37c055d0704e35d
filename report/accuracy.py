"""The report's accuracy section: the counts, the proof log, the failures (in their classes'
order, each with its class and what is known of it as flaky) and the skip reasons."""

from __future__ import annotations

from report.failures import LABEL, class_words, classes, known, known_words, ordered
from report.gate import failures_fail_gate
from report.limits import Limits
from report.markdown import (
    ELLIPSIS,
    code_span,
    details,
    duration,
    escape_text,
    link,
    log_block,
    plural,
    short_sha,
)
from report.summary import unproved_in
from report.text import counts
from report.views import JobView
from workflows.models import AccuracyResult, Proof, TestFailure


def accuracy_section(acc: AccuracyResult | None, view: JobView, limits: Limits) -> list[str]:
    if acc is None:
        return []
    parts = ["#### Accuracy"]
    line = f"**{counts(acc)}** of {plural(acc.total, 'test')}"
    if acc.implementation:
        line += f" · implementation {code_span(acc.implementation, 150)}"
    parts.append(line)
    if acc.proof is not None:
        parts.append(_proof(acc.proof, unproved_in(acc), limits))
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
