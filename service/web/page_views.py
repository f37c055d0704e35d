"""What the pages show, as plain data built from job rows: the step timeline, the log tail, the
queue per backend, runners and their jobs, the history, and the speedup charts (inline SVG).
Pure functions, so the templates only lay them out."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from html import escape

from service.db.models import Delivery, Job, OutboxItem, Runner
from service.github.installations import PermissionProblem
from service.github.permissions import find
from service.queue.flaky import FlakyRow
from service.render.markdown import clean, duration, plural, utc
from service.render.views import JobView
from workflows.models import BenchmarkResult, JobResult, JobStatus, Rounds, StepResult

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
class DrainedLine:
    """One job that drained a runner: its id, and its step and error where it is public
    (`public` False: a private repository's job, or one no longer kept)."""

    job_id: int
    public: bool
    step: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class RunnerRow:
    runner: Runner
    online: bool
    jobs: list[Job | None]  # None: a private repository's job
    elapsed: list[str] = field(default_factory=list)
    drained: list[DrainedLine] = field(default_factory=list)  # why it is drained
    drained_since: datetime | None = None


def drained_ids(runners: Sequence[Runner]) -> set[int]:
    """The jobs the runners' drains name (to read whether each is public)."""
    return {int(j["id"]) for r in runners for j in (r.drained or {}).get("jobs") or ()}


def runner_rows(
    runners: Sequence[Runner],
    running: Sequence[Job],
    online: Mapping[int, bool],
    now: datetime,
    named: Mapping[int, Job] | None = None,
) -> list[RunnerRow]:
    """The runners' rows; `named`: the jobs their drains name, by id (`drained_ids`)."""
    rows = []
    for runner in runners:
        mine = [j for j in running if j.runner_id == runner.id]
        drain = runner.drained or {}
        lines = []
        for item in drain.get("jobs") or ():
            job = (named or {}).get(int(item["id"]))
            public = job is not None and not job.private
            step, error = (item.get("step"), item.get("error")) if public else (None, None)
            lines.append(DrainedLine(int(item["id"]), public, step, error))
        since = drain.get("since")
        rows.append(
            RunnerRow(
                runner,
                online[runner.id],
                [None if j.private else j for j in mine],
                [waited(j.started_at or j.created_at, now) for j in mine],
                lines,
                datetime.fromtimestamp(since, UTC) if isinstance(since, int | float) else None,
            )
        )
    return rows


@dataclass(frozen=True)
class PermissionNotice:
    """One line of the dashboard's banner: a permission the App lacks (`label`), where, what
    waits for it (or that the start-up check found it), and what it stops."""

    label: str
    where: str
    waiting: str
    without: str


def _permission(key: str) -> tuple[str, str]:
    """(`Contents: read`, what lacking it stops) for a waited-for `contents:read`."""
    name, _, level = key.partition(":")
    known = find(name, level)
    return (known.label, known.without) if known else (f"{name}: {level}", "")


def _where(repo: str, private: bool) -> str:
    """A repository as the dashboard may name it: a private one only by its owner."""
    owner = repo.split("/")[0] or "?"
    return f"a private repository of {owner}" if private else repo


def permission_notices(
    deliveries: Sequence[Delivery],
    items: Sequence[OutboxItem],
    problems: Sequence[PermissionProblem],
    private: set[str],
    now: datetime,
) -> list[PermissionNotice]:
    """The banner: per (permission, repository) what waits for it, oldest first, and per
    (permission, installation) what the start-up check or an `installation` event found."""
    found: dict[tuple[str, str], list[datetime]] = {}
    counts: dict[tuple[str, str], list[int]] = {}
    for delivery in deliveries:
        repository = (delivery.payload or {}).get("repository") or {}
        repo = str(repository.get("full_name") or "") if isinstance(repository, dict) else ""
        private_repo = bool(repository.get("private")) if isinstance(repository, dict) else True
        key = (delivery.waiting_for or "", _where(repo, private_repo))
        found.setdefault(key, []).append(delivery.received_at)
        counts.setdefault(key, [0, 0])[0] += 1
    for item in items:
        repo = str(item.payload.get("repo") or "")
        key = (item.waiting_for or "", _where(repo, repo in private))
        found.setdefault(key, []).append(item.created_at)
        counts.setdefault(key, [0, 0])[1] += 1
    out = []
    for (waiting_for, where), since in found.items():
        label, without = _permission(waiting_for)
        n_in, n_out = counts[(waiting_for, where)]
        what = [
            f"{plural(n_in, 'delivery', 'deliveries')} from GitHub" if n_in else "",
            f"{plural(n_out, 'update')} to GitHub" if n_out else "",
        ]
        waits = " and ".join(w for w in what if w)
        text = f"{waits} {'waits' if n_in + n_out == 1 else 'wait'}, the oldest for "
        out.append(PermissionNotice(label, where, text + waited(min(since), now), without))
    for problem in problems:
        where = f"installation {problem.installation_id} on {problem.account or '?'}"
        checked = f"the installation has {problem.granted}"
        out.append(
            PermissionNotice(problem.permission.label, where, checked, problem.permission.without)
        )
    return sorted(out, key=lambda n: (n.label, n.where))


def job_duration(job: Job, now: datetime, estimate_s: float | None = None) -> str:
    """How long it ran (so far, while running, with `estimate_s`, how long such jobs took:
    `1m 10s of about 2m 05s`); empty before it started."""
    if job.started_at is None:
        return ""
    ran = waited(job.started_at, job.finished_at or now)
    if job.finished_at is None and estimate_s:
        return f"{ran} of about {duration(estimate_s)}"
    return ran


def _benchmark(job: Job) -> BenchmarkResult | None:
    """A finished job's benchmark when it timed something: None under the interpreter (its
    timings are not performance), without rows, or for a result that does not parse."""
    if not job.result or not isinstance(job.result.get("benchmark"), dict):
        return None
    try:
        bench = BenchmarkResult.model_validate(job.result["benchmark"])
    except ValueError:
        return None
    return bench if bench.performance and bench.rows else None


def _positive(value: float | None) -> float | None:
    """`value` where a log scale can place it (finite and above zero), else None."""
    return value if value is not None and math.isfinite(value) and value > 0 else None


def _rounded(rounds: Rounds | None) -> Rounds | None:
    """The rounds' summary where its median can be drawn, else None (as if there were none)."""
    return rounds if rounds is not None and _positive(rounds.median) is not None else None


def job_speedup(job: Job) -> float | None:
    """The geometric-mean speedup a finished job measured: the median over its comparison's
    rounds where it has them, else the one measurement's; None where `_benchmark` has none."""
    bench = _benchmark(job)
    return None if bench is None else _speedup(bench)


def _speedup(bench: BenchmarkResult) -> float | None:
    rounds = _rounded(bench.geometric_mean_rounds)
    if rounds is not None:
        return rounds.median
    geo = bench.geometric_mean_speedup
    if geo is None:
        geo = BenchmarkResult.means([r.speedup for r in bench.rows])[1]
    return _positive(geo)


@dataclass(frozen=True)
class ChartPoint:
    """One measured speedup: the job that measured it, the commit it measured (the pull
    request's, or for the default branch the job's base commit) and, where the job timed
    rounds, how many and the 95 % interval of their median (both bounds, or neither)."""

    job_id: int
    sha: str
    speedup: float
    low: float | None = None
    high: float | None = None
    rounds: int | None = None


def _point(job_id: int, sha: str, speedup: float, rounds: Rounds | None) -> ChartPoint:
    """A point of `speedup`, with the interval of `rounds` where it bounds both sides."""
    if rounds is None:
        return ChartPoint(job_id, sha, speedup)
    low, high = _positive(rounds.low), _positive(rounds.high)
    if low is None or high is None:
        return ChartPoint(job_id, sha, speedup, rounds=rounds.rounds)
    return ChartPoint(job_id, sha, speedup, min(low, high), max(low, high), rounds.rounds)


@dataclass(frozen=True)
class Chart:
    op: str
    backend: str
    points: list[ChartPoint]
    svg: str
    base: list[ChartPoint] = field(default_factory=list)  # the default branch's, maybe none


def charts(jobs: Sequence[Job]) -> list[Chart]:
    """Per (operator, backend), over its benchmarked jobs in the order given (oldest first):
    each job's geometric-mean speedup, and the default branch's line from the merge bases the
    comparisons measured, one point per base commit: its latest job's measurement, in that
    job's place, so a drift of the default branch across pull requests shows."""
    series: dict[tuple[str, str], list[ChartPoint]] = {}
    bases: dict[tuple[str, str], dict[str, ChartPoint]] = {}
    for job in jobs:
        bench = _benchmark(job)
        speedup = None if bench is None else _speedup(bench)
        if bench is None or speedup is None:
            continue
        key = (job.op, job.backend)
        rounds = _rounded(bench.geometric_mean_rounds)
        series.setdefault(key, []).append(_point(job.id, job.sha, speedup, rounds))
        before = _rounded(bench.before_geometric_mean_rounds)
        base_sha = bench.merge_base or job.base_sha  # the commit measured, where it was said
        if before is not None and base_sha:
            measured = bases.setdefault(key, {})
            measured.pop(base_sha, None)  # a later job's measurement, in its place
            measured[base_sha] = _point(job.id, base_sha, before.median, before)
    out = []
    for (op, backend), points in sorted(series.items()):
        base = list(bases.get((op, backend), {}).values())
        out.append(Chart(op, backend, points, speedup_svg(points, base), base))
    return out


def _times(value: float) -> str:
    """A speedup as the charts say it: two decimals (two significant digits below 0.1x)."""
    return f"{value:.2f}x" if value >= 0.1 else f"{value:.2g}x"


def _label(p: ChartPoint) -> str:
    """`1.61x (95 % 1.58–1.64x, 8 rounds)`; the value alone without rounds."""
    if p.rounds is None:
        return _times(p.speedup)
    counted = f"{p.rounds} round{'' if p.rounds == 1 else 's'}"
    if p.low is None or p.high is None:
        return f"{_times(p.speedup)} ({counted}, too few for an interval)"
    return f"{_times(p.speedup)} (95 % {_times(p.low)[:-1]}–{_times(p.high)}, {counted})"


def speedup_svg(
    points: Sequence[ChartPoint],
    base: Sequence[ChartPoint] = (),
    width: int = 480,
    height: int = 160,
) -> str:
    """Speedups over commits on a log scale, the 1.0x line dashed: the pull requests' line and,
    when `base` has points, the default branch's (grey, dashed, hollow points; each beside the
    point of the job in `points` that measured it, so both whiskers show) with a legend. A
    point with an interval has a whisker over it; each says its job, commit and value on
    hover. Every text in it is escaped."""
    placed = {p.job_id: i for i, p in enumerate(points)}
    base = [b for b in base if b.job_id in placed]
    pad_l, pad_r, pad_t, pad_b = 44, 16 if base else 10, 24 if base else 10, 22
    beside = 6.0  # how far right of its job's point a base point stands
    values = [v for p in (*points, *base) for v in (p.speedup, p.low, p.high) if v is not None]
    lo = min([*values, 1.0]) / 1.25
    hi = max([*values, 1.0]) * 1.25
    span = math.log(hi) - math.log(lo)

    def y(v: float) -> float:
        return pad_t + (height - pad_t - pad_b) * (1 - (math.log(v) - math.log(lo)) / span)

    def x(p: ChartPoint, shift: float) -> float:
        inner, i = width - pad_l - pad_r, placed[p.job_id]
        return shift + pad_l + (inner / 2 if len(points) == 1 else inner * i / (len(points) - 1))

    def line(of: Sequence[ChartPoint], kind: str, shift: float) -> str:
        coords = " ".join(f"{x(p, shift):.1f},{y(p.speedup):.1f}" for p in of)
        return f'<polyline points="{coords}" class="{kind}"/>'

    def point(p: ChartPoint, kind: str, label: str, shift: float) -> str:
        cx, cy = x(p, shift), y(p.speedup)
        out = [f'<g class="point {kind}" data-job="{p.job_id}"><title>{escape(label)}</title>']
        if p.low is not None and p.high is not None:
            low, high = y(p.low), y(p.high)
            out.append(
                f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{low:.1f}" y2="{high:.1f}" '
                'class="whisker"/>'
                f'<line x1="{cx - 4:.1f}" x2="{cx + 4:.1f}" y1="{low:.1f}" y2="{low:.1f}" '
                'class="cap low"/>'
                f'<line x1="{cx - 4:.1f}" x2="{cx + 4:.1f}" y1="{high:.1f}" y2="{high:.1f}" '
                'class="cap high"/>'
            )
        shade = "base" if kind == "base" else "up" if p.speedup >= 1 else "down"
        out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3.5" class="{shade}"/></g>')
        return "".join(out)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" class="chart">',
        f'<line x1="{pad_l}" x2="{width - pad_r}" y1="{y(1.0):.1f}" y2="{y(1.0):.1f}" '
        'class="one"/>',
        f'<text x="{pad_l - 4}" y="{y(1.0) + 4:.1f}" text-anchor="end">1.0x</text>',
        f'<text x="{pad_l - 4}" y="{pad_t + 8}" text-anchor="end">{hi:.2g}x</text>',
        f'<text x="{pad_l - 4}" y="{height - pad_b}" text-anchor="end">{lo:.2g}x</text>',
    ]
    if base:
        parts.append(
            f'<g class="legend"><line x1="{pad_l}" x2="{pad_l + 18}" y1="9" y2="9" class="line"/>'
            f'<text x="{pad_l + 22}" y="12">pull request</text>'
            f'<line x1="{pad_l + 110}" x2="{pad_l + 128}" y1="9" y2="9" class="line base"/>'
            f'<circle cx="{pad_l + 119}" cy="9" r="3" class="base"/>'
            f'<text x="{pad_l + 132}" y="12">default branch (the merge bases measured)</text>'
            "</g>"
        )
        parts.append(line(base, "line base", beside))
        parts.extend(
            point(
                b, "base", f"default branch · {b.sha[:7]} · {_label(b)} · job #{b.job_id}", beside
            )
            for b in base
        )
    parts.append(line(points, "line", 0.0))
    parts.extend(
        point(p, "pr", f"job #{p.job_id} · {p.sha[:7]} · {_label(p)}", 0.0) for p in points
    )
    first, last = points[0], points[-1]
    parts.append(
        f'<text x="{pad_l}" y="{height - 6}">{escape(first.sha[:7])}</text>'
        f'<text x="{width - pad_r}" y="{height - 6}" text-anchor="end">'
        f"{escape(last.sha[:7])} · {_times(last.speedup)}</text>"
    )
    parts.append("</svg>")
    return "".join(parts)


@dataclass(frozen=True)
class FlakyView:
    """One known flaky test as the dashboard lists it."""

    repo: str
    backend: str
    op: str
    test_id: str
    rate: str  # of its re-runs, the share that failed
    flaky_jobs: int
    last_seen: str
    job_ids: tuple[int, ...]  # the latest few, newest first


def flaky_rows(rows: Sequence[FlakyRow], private: set[str], now: datetime) -> list[FlakyView]:
    """The dashboard's flaky tests, per repository and backend, less a private repository's."""
    shown = []
    for row in rows:
        if row.repo in private:
            continue
        rate = row.flake_rate
        failed = "–" if rate is None else f"{rate * 100:.0f} % of {plural(row.reruns, 're-run')}"
        shown.append(
            FlakyView(
                repo=row.repo,
                backend=row.backend,
                op=row.op,
                test_id=row.test_id,
                rate=failed,
                flaky_jobs=row.flaky_jobs,
                last_seen=f"{waited(row.last_seen_at, now)} ago",
                job_ids=tuple(reversed(row.job_ids[-5:])),
            )
        )
    return shown
