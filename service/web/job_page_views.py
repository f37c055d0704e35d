"""What a job's page shows, as plain data built from its row: the step timeline, its progress,
the log's tail, why a log or a job is not there, and how long it waited or ran. Pure
functions, so the templates only lay them out."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from report.markdown import clean, duration, utc
from report.views import JobView
from service.db.models import Job
from workflows.models import JobResult, JobStatus, StepResult

SETUP_STEPS = ("checkout", "environment")
_STEP_EVENT = re.compile(rb"^\[ondemand\] step ([^:\n]{1,100}): (exit )?", re.MULTILINE)


@dataclass(frozen=True)
class TimelineStep:
    name: str
    state: str  # pending, running, or a StepStatus value
    duration: str = ""


def timeline(
    planned: Sequence[str],
    status: str,
    result: JobResult | None,
    log_tail: bytes = b"",
    current: str | None = None,
) -> list[TimelineStep]:
    """The job's steps in order. Finished: as the runner reported them. Running: the steps
    before the current one are done, the current one runs (`current`, as the runner streamed
    it, else the last `step NAME:` line of the log tail), the rest wait."""
    if result is not None and result.steps:
        return [_reported(step) for step in result.steps]
    names = [*SETUP_STEPS, *planned]
    if status != JobStatus.running:
        state = "pending" if status == JobStatus.queued else "skipped"
        return [TimelineStep(name, state) for name in names]
    event = _last_event(log_tail)
    running = current or (event[0] if event else None)
    if running is not None and running not in names:
        names.append(running)  # a step of another repository layout
    index = names.index(running) if running is not None else int(bool(log_tail))
    done = current is None and event is not None and event == (running, True)
    out: list[TimelineStep] = []
    for i, name in enumerate(names):
        if i < index or (i == index and done):
            out.append(TimelineStep(name, "succeeded"))
        elif i == index:
            out.append(TimelineStep(name, "running"))
        else:
            out.append(TimelineStep(name, "pending"))
    return out


def _reported(step: StepResult) -> TimelineStep:
    return TimelineStep(step.name, step.status.value, duration(step.duration_s))


def _last_event(log_tail: bytes) -> tuple[str, bool] | None:
    """The last `step NAME:` line the runner logged: the step, and whether it had ended."""
    found = _STEP_EVENT.findall(log_tail)
    if not found:
        return None
    name, ended = found[-1]
    return name.decode(errors="replace"), bool(ended)


def progress_text(view: JobView) -> str:
    """`accuracy: 120 of 308 tests · 2 failed (test_a, test_b)`, as the runner streams it."""
    progress = view.progress
    if progress is None or view.status is not JobStatus.running:
        return ""
    parts = [f"{progress.step}:" if progress.step else ""]
    if progress.tests_total:
        parts.append(f"{progress.tests_done} of {progress.tests_total} tests")
    elif progress.tests_done:
        parts.append(f"{progress.tests_done} tests")
    if progress.failed:
        shown = ", ".join(progress.failures[:5])
        parts.append(f"· {progress.failed} failed" + (f" ({shown})" if shown else ""))
    return " ".join(p for p in parts if p)


def log_text(tail: bytes, cut: bool) -> str:
    """The log's tail as text: from its first whole line when `cut`, without ANSI codes."""
    text = tail.decode("utf-8", errors="replace")
    if cut and "\n" in text:
        text = text.split("\n", 1)[1]
    return clean(text)


def pruned_log_text(finished: datetime | None, pruned: datetime) -> str:
    """What the job page and the log's URL say of a log retention deleted."""
    after = ""
    if finished is not None:
        days = max((pruned - finished).days, 0)
        after = f" {days} day{'' if days == 1 else 's'} after the job finished"
    return f"This log was pruned{after} ({utc(pruned)}); the job, its result and its report stay."


def missing_job_text(job_id: int, kept_days: float) -> str:
    """Why a job's page is not found: it may have been pruned, or be a private one's."""
    pruned = (
        f" Finished jobs are kept for {kept_days:g} days, so it may have been pruned."
        if kept_days > 0
        else ""
    )
    return (
        f"There is no job #{job_id} here.{pruned} A private repository's job opens only "
        "through the link its pull request shows."
    )


def waited(since: datetime, now: datetime) -> str:
    return duration(max((now - since).total_seconds(), 0.0))


def job_duration(job: Job, now: datetime, estimate_s: float | None = None) -> str:
    """How long it ran (so far, while running, with `estimate_s`, how long such jobs took:
    `1m 10s of about 2m 05s`); empty before it started."""
    if job.started_at is None:
        return ""
    ran = waited(job.started_at, job.finished_at or now)
    if job.finished_at is None and estimate_s:
        return f"{ran} of about {duration(estimate_s)}"
    return ran
