"""The result comment of one (PR, operator, backend).

The comment is updated in place as the job goes from queued to its end; earlier runs of the
same pair stay under it, collapsed. Layout: headline, the commit/runner/device/duration/links
line, the environment, then accuracy (`accuracy`), performance (`performance`) and, for
errors, the failing step's log tail; under the table, a `/test profile` job's Profile section
(`profile`), never part of the verdict. Everything is capped so the comment stays under GitHub's
65536-character limit: the renderer tries ever smaller limits (`limits.LEVELS`) until it fits.
"""

from __future__ import annotations

from collections.abc import Sequence

from report.accuracy import accuracy_section
from report.limits import LEVELS, Limits
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
    utc,
)
from report.performance import performance_section
from report.profile import profile_section
from report.summary import failed_step, headline
from report.views import JobView
from workflows.models import JobResult, JobStatus, StepStatus

MAX_COMMENT_CHARS = 65536
COMMENT_BUDGET = 60000  # headroom: GitHub may count some characters (emoji) twice


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


def _comment(view: JobView, earlier: Sequence[JobView], limits: Limits) -> str:
    parts = [marker(view.op, view.backend), f"### {headline(view)}", facts(view)]
    result = view.result
    if view.status is JobStatus.running:
        parts.append(progress_section(view, limits))
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
            parts += accuracy_section(result.accuracy, view, limits)
            parts += performance_section(result.benchmark, view, limits)
            parts += profile_section(result.profile, view, limits)
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
                facts(view),
                "The full report is too long for a comment: see the "
                f"{link('job page', view.job_url)} and the {link('full log', view.log_url)}.",
            ]
        )
        + "\n"
    )


def facts(view: JobView) -> str:
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


def progress_section(view: JobView, limits: Limits) -> str:
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
    """The device, vendor, driver, torch and triton, then the vendor's own packages by name
    (the workflow's `device.packages`: `torch_musa `1.3.0``), the runner's slot that ran it
    (its device and cores), and the host's notes."""
    env = result.environment
    fields = [
        ("device", env.device_name),
        ("vendor", env.vendor),
        ("driver", env.driver),
        ("torch", env.torch),
        ("triton", env.triton),
    ]
    for name, version in list(env.packages.items())[:8]:
        # Letters and digits joined by single `._-` render as they are; anything else (a
        # runner's word) is escaped, so no markdown in it acts.
        parts = name.replace(".", "_").replace("-", "_").split("_")
        plain = name.isascii() and all(part.isalnum() for part in parts)
        fields.append((name if plain else escape_text(name, 64), version))
    if env.slot is not None:  # where on the runner: a fan-out's jobs each say their slot
        fields += [("slot", str(env.slot.index)), ("visible device", env.slot.device)]
        fields.append(("cores", env.slot.cores))
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


def _error(view: JobView, result: JobResult, limits: Limits) -> list[str]:
    """For errored and timed-out jobs, and failed ones without failure details: the step
    that failed, its exit status and the last lines of its log."""
    structured = result.accuracy is not None and bool(result.accuracy.failures)
    if view.status is JobStatus.failed and structured:
        return []
    if view.status not in (JobStatus.errored, JobStatus.timed_out, JobStatus.failed):
        return []
    step = failed_step(result)
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
