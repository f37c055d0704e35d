"""What the pages show, as plain data built from job rows: the step timeline, the log tail, the
queue per backend, runners and their jobs, the history, and the speedup charts (inline SVG).
Pure functions, so the templates only lay them out."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from html import escape

from service.db.models import Job, Runner
from service.render.markdown import clean, duration
from service.render.views import JobView
from workflows.models import BenchmarkResult, JobResult, JobStatus, StepResult

SETUP_STEPS = ("checkout", "environment")
FINAL = frozenset(s.value for s in JobStatus) - {"queued", "running"}
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


def waited(since: datetime, now: datetime) -> str:
    return duration(max((now - since).total_seconds(), 0.0))


@dataclass(frozen=True)
class QueueRow:
    position: int
    job: Job | None  # None: a job of a private repository, counted but not shown
    waiting: str


@dataclass(frozen=True)
class BackendQueue:
    backend: str
    rows: list[QueueRow]
    runners_online: int
    oldest_wait: str


def queues(
    queued: Sequence[Job],
    backends: Sequence[str],
    online: Mapping[str, int],
    now: datetime,
) -> list[BackendQueue]:
    """Every known backend's queue in claim order (positions count private jobs too)."""
    by_backend: dict[str, list[Job]] = {b: [] for b in backends}
    for job in queued:
        by_backend.setdefault(job.backend, []).append(job)
    out = []
    for backend, jobs in by_backend.items():
        rows = [
            QueueRow(i, None if job.private else job, waited(job.created_at, now))
            for i, job in enumerate(jobs, 1)
        ]
        oldest = waited(jobs[0].created_at, now) if jobs else ""
        out.append(BackendQueue(backend, rows, online.get(backend, 0), oldest))
    return out


@dataclass(frozen=True)
class RunnerRow:
    runner: Runner
    online: bool
    jobs: list[Job | None]  # None: a private repository's job
    elapsed: list[str] = field(default_factory=list)


def runner_rows(
    runners: Sequence[Runner], running: Sequence[Job], online: Mapping[int, bool], now: datetime
) -> list[RunnerRow]:
    rows = []
    for runner in runners:
        mine = [j for j in running if j.runner_id == runner.id]
        rows.append(
            RunnerRow(
                runner,
                online[runner.id],
                [None if j.private else j for j in mine],
                [waited(j.started_at or j.created_at, now) for j in mine],
            )
        )
    return rows


def job_duration(job: Job, now: datetime, estimate_s: float | None = None) -> str:
    """How long it ran (so far, while running, with `estimate_s`, how long such jobs took:
    `1m 10s of about 2m 05s`); empty before it started."""
    if job.started_at is None:
        return ""
    ran = waited(job.started_at, job.finished_at or now)
    if job.finished_at is None and estimate_s:
        return f"{ran} of about {duration(estimate_s)}"
    return ran


def job_speedup(job: Job) -> float | None:
    """The geometric-mean speedup a finished job measured; None under the interpreter (its
    timings are not performance), without a benchmark, or for a result that does not parse."""
    if not job.result or not isinstance(job.result.get("benchmark"), dict):
        return None
    try:
        bench = BenchmarkResult.model_validate(job.result["benchmark"])
    except ValueError:
        return None
    if not bench.performance or not bench.rows:
        return None
    geo = bench.geometric_mean_speedup
    if geo is None:
        geo = BenchmarkResult.means([r.speedup for r in bench.rows])[1]
    return geo if geo is not None and math.isfinite(geo) and geo > 0 else None


@dataclass(frozen=True)
class ChartPoint:
    job_id: int
    sha: str
    speedup: float


@dataclass(frozen=True)
class Chart:
    op: str
    backend: str
    points: list[ChartPoint]
    svg: str


def charts(jobs: Sequence[Job]) -> list[Chart]:
    """Per (operator, backend): the geometric-mean speedup of each benchmarked job, in order."""
    series: dict[tuple[str, str], list[ChartPoint]] = {}
    for job in jobs:
        speedup = job_speedup(job)
        if speedup is not None:
            series.setdefault((job.op, job.backend), []).append(
                ChartPoint(job.id, job.sha, speedup)
            )
    return [
        Chart(op, backend, points, speedup_svg(points))
        for (op, backend), points in sorted(series.items())
    ]


def speedup_svg(points: Sequence[ChartPoint], width: int = 480, height: int = 160) -> str:
    """A line of speedups over commits on a log scale, the 1.0x line dashed; each point says
    its job, commit and value on hover. Every text in it is escaped."""
    pad_l, pad_r, pad_t, pad_b = 44, 10, 10, 22
    values = [p.speedup for p in points]
    lo = min([*values, 1.0]) / 1.25
    hi = max([*values, 1.0]) * 1.25
    span = math.log(hi) - math.log(lo)

    def y(v: float) -> float:
        return pad_t + (height - pad_t - pad_b) * (1 - (math.log(v) - math.log(lo)) / span)

    def x(i: int) -> float:
        inner = width - pad_l - pad_r
        return pad_l + (inner / 2 if len(points) == 1 else inner * i / (len(points) - 1))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" class="chart">',
        f'<line x1="{pad_l}" x2="{width - pad_r}" y1="{y(1.0):.1f}" y2="{y(1.0):.1f}" '
        'class="one"/>',
        f'<text x="{pad_l - 4}" y="{y(1.0) + 4:.1f}" text-anchor="end">1.0x</text>',
        f'<text x="{pad_l - 4}" y="{pad_t + 8}" text-anchor="end">{hi:.2g}x</text>',
        f'<text x="{pad_l - 4}" y="{height - pad_b}" text-anchor="end">{lo:.2g}x</text>',
    ]
    coords = " ".join(f"{x(i):.1f},{y(p.speedup):.1f}" for i, p in enumerate(points))
    parts.append(f'<polyline points="{coords}" class="line"/>')
    for i, p in enumerate(points):
        label = escape(f"job #{p.job_id} · {p.sha[:7]} · {p.speedup:.3f}x")
        parts.append(
            f'<circle cx="{x(i):.1f}" cy="{y(p.speedup):.1f}" r="3.5" '
            f'class="{"up" if p.speedup >= 1 else "down"}"><title>{label}</title></circle>'
        )
    first, last = points[0], points[-1]
    parts.append(
        f'<text x="{pad_l}" y="{height - 6}">{escape(first.sha[:7])}</text>'
        f'<text x="{width - pad_r}" y="{height - 6}" text-anchor="end">'
        f"{escape(last.sha[:7])} · {last.speedup:.2f}x</text>"
    )
    parts.append("</svg>")
    return "".join(parts)
