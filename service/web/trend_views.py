"""What an operator's trend page shows, as plain data: each row of its benchmark (dtype ×
shape, metric) over the default branch's commits in order, each point the row's time at that
commit with its noise band, the pull requests' own runs beside the commit each was compared
with, and the regressions marked (a point flagged on its own or ending a drift, and the rows
the open regression issue lists). Pure functions over frozen dataclasses; `trend_reads.py`
reads them, `trend_chart.py` draws them."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from pydantic import ValidationError

from report.verdicts import band_text, percent
from service.db.models import Job
from service.history.record import shape_text
from workflows.models import BenchmarkRow, Change, JobResult

UNITS = {"device": "ms", "host": "µs"}  # a series' time: device ms, a host-bound row's µs
COMMITS_SHOWN = 60  # the newest default-branch commits a page draws
RowKey = tuple[str, str, str]  # dtype, shape, metric


@dataclass(frozen=True)
class Band:
    """Where a point's time lies, its comparison's 95 % interval mapped onto time."""

    low: float
    high: float


def _finite(value: float | None) -> float | None:
    """`value` where it can be drawn (finite, above zero), else None."""
    return value if value is not None and math.isfinite(value) and value > 0 else None


def band(value: float, ratio: float, low: float | None, high: float | None) -> Band | None:
    """The noise band of a point whose time is `value` after a change of `ratio` (after /
    before) with the interval `low`–`high`: the commit it was compared with took value / ratio,
    so the interval puts this commit's time between value·low/ratio and value·high/ratio.
    None where the interval is open (too few rounds) or a number cannot be drawn."""
    lo, hi, r = _finite(low), _finite(high), _finite(ratio)
    if lo is None or hi is None or r is None or _finite(value) is None:
        return None
    return Band(value * min(lo, hi) / r, value * max(lo, hi) / r)


# -- what the page reads ------------------------------------------------------------------


@dataclass(frozen=True)
class Recorded:
    """One stored point of a row's series (`history_points`): the change from `base_sha` to
    `sha`, the row's time at `sha` (`value`: ms, or µs for the host metric)."""

    id: int
    dtype: str
    shape: str
    metric: str
    sha: str
    base_sha: str
    job_id: int
    rounds: int
    ratio: float
    low: float | None
    high: float | None
    value: float | None
    verdict: str
    mark: str | None
    created_at: datetime

    @property
    def key(self) -> RowKey:
        return self.dtype, self.shape, self.metric


@dataclass(frozen=True)
class CommitRun:
    """What ran a default-branch commit: a push (and the pull request it merged) or a night."""

    trigger: str
    pull_number: int | None = None


@dataclass(frozen=True)
class PullRun:
    """A pull request's own job of the operator and backend: its rows' after-times by row."""

    job_id: int
    pr_number: int
    sha: str
    base_sha: str | None  # the commit it was compared with, where known
    created_at: datetime
    times: Mapping[RowKey, float]


@dataclass(frozen=True)
class IssueRow:
    """A row the open regression issue lists: where its slowdown starts and how it stands."""

    dtype: str
    shape: str
    metric: str
    kind: str  # slower, or drift
    start_id: int  # the point its slowdown is counted from
    found_at: str
    recovered_at: str | None = None

    @property
    def key(self) -> RowKey:
        return self.dtype, self.shape, self.metric


@dataclass(frozen=True)
class OpenIssue:
    """The open regression issue of the operator and backend; its number once GitHub made it
    (`url` then links to it)."""

    number: int | None
    url: str | None
    rows: tuple[IssueRow, ...]


def pull_run(job: Job) -> PullRun | None:
    """A pull request's finished job as a run beside the default branch: each timed row's
    after-time (device ms, and µs for a row that timed its host), or None where it timed
    nothing (no result, interpreter runs, no rows)."""
    try:
        result = JobResult.model_validate(job.result)
    except ValidationError:
        return None
    bench = result.benchmark
    if bench is None or not bench.performance or not bench.rows:
        return None
    times: dict[RowKey, float] = {}
    for row in bench.rows:
        for metric, value in _row_times(row):
            times[(row.dtype, shape_text(row), metric)] = value
    base = bench.merge_base or job.base_sha
    return PullRun(job.id, job.pr_number, job.sha, base, job.created_at, times)


def _row_times(row: BenchmarkRow) -> list[tuple[str, float]]:
    found = [("device", _finite(row.kernel_ms)), ("host", _finite(row.kernel_host_us))]
    return [(metric, value) for metric, value in found if value is not None]


# -- what the page shows ------------------------------------------------------------------


@dataclass(frozen=True)
class Commit:
    """A default-branch commit on the page's axis, at `slot` (0 the oldest shown)."""

    sha: str
    slot: int
    label: str  # `push, merged #12`, `nightly`, or empty where no run is known


@dataclass(frozen=True)
class TrendPoint:
    """A row's time at a commit, its band and its change from the commit it was compared
    with, linking to the job that measured it."""

    id: int
    slot: int
    sha: str
    job_id: int
    value: float
    band: Band | None
    change: str  # `+5.0 % ±1.2 % from abc1234 (8 rounds)`
    verdict: str
    mark: str | None
    href: str
    title: str


@dataclass(frozen=True)
class PullPoint:
    """A pull request's run of the row beside the commit it was compared with."""

    job_id: int
    pr_number: int
    sha: str
    slot: float
    value: float
    href: str
    title: str


@dataclass(frozen=True)
class Marker:
    """A regression marked on a row's chart: a point's own mark (slower, faster, drift) over
    its band, or where the open issue counts the row's slowdown from (`issue`)."""

    kind: str
    point_id: int
    slot: float
    value: float  # the top of what it marks
    label: str
    href: str | None = None


@dataclass(frozen=True)
class RowTrend:
    """One row's series as drawn: `enough` where it has two points or more to draw a line."""

    dtype: str
    shape: str
    metric: str
    unit: str
    points: tuple[TrendPoint, ...]
    pulls: tuple[PullPoint, ...]
    markers: tuple[Marker, ...]
    issue_row: IssueRow | None = None

    @property
    def enough(self) -> bool:
        return len(self.points) >= 2

    @property
    def name(self) -> str:
        """`float32 1024×1024`, `float32 1024×1024 (host time)`."""
        own = f"{self.dtype} {self.shape}"
        return f"{own} (host time)" if self.metric == "host" else own


@dataclass(frozen=True)
class Trend:
    commits: tuple[Commit, ...]
    rows: tuple[RowTrend, ...]
    older: int  # commits with history older than those shown


def time_text(value: float, unit: str) -> str:
    """`1.234 ms`, `812.5 µs`, `12,345 ms`: four significant digits, no exponent."""
    return f"{value:,.0f} {unit}" if value >= 10_000 else f"{value:.4g} {unit}"


def commit_axis(records: Sequence[Recorded], limit: int = COMMITS_SHOWN) -> tuple[list[str], int]:
    """The default branch's commits in the order their runs recorded them (each at its first
    point), the newest `limit`; and how many older ones are left out."""
    order: dict[str, int] = {}
    for record in sorted(records, key=lambda r: r.id):
        order.setdefault(record.sha, record.id)
    shas = list(order)
    return shas[-limit:], max(len(shas) - limit, 0)


def commit_label(run: CommitRun | None) -> str:
    if run is None:
        return ""
    if run.trigger == "push" and run.pull_number:
        return f"push, merged #{run.pull_number}"
    return run.trigger


def series(records: Sequence[Recorded]) -> dict[RowKey, list[Recorded]]:
    """Each row's points, rows in the order they were first measured (a row's host time after
    its device time), one point per commit: the latest recorded at it (a later run of the
    same commit, against another base, stands in its place), oldest first."""
    rows: dict[RowKey, dict[str, Recorded]] = {}
    for record in sorted(records, key=lambda r: r.id):
        at = rows.setdefault(record.key, {})
        at.pop(record.sha, None)
        at[record.sha] = record
    first = {key: min(r.id for r in at.values()) for key, at in rows.items()}
    pairs = {(d, s) for d, s, _ in rows}
    began = {pair: min(first[k] for k in rows if k[:2] == pair) for pair in pairs}
    order = sorted(rows, key=lambda k: (began[k[:2]], k[2] != "device", k[2]))
    return {key: sorted(rows[key].values(), key=lambda r: r.id) for key in order}


def place_pulls(
    shas: Sequence[str], first_seen: Mapping[str, datetime], runs: Sequence[PullRun]
) -> list[tuple[float, PullRun]]:
    """Each pull request's run at a place on the axis: beside the commit it was compared
    with where that is shown, else beside the newest shown commit recorded before it was
    made; left out where neither is (older than what is shown). Runs at one commit share its
    slot's right half, in the order they were made."""
    slot_of = {sha: i for i, sha in enumerate(shas)}
    at: dict[int, list[PullRun]] = {}
    for run in sorted(runs, key=lambda r: (r.created_at, r.job_id)):
        slot = slot_of.get(run.base_sha or "")
        if slot is None:
            before = [
                slot_of[s] for s in shas if first_seen.get(s, run.created_at) <= run.created_at
            ]
            slot = max(before) if before else None
        if slot is not None:
            at.setdefault(slot, []).append(run)
    placed = []
    for slot, here in sorted(at.items()):
        for j, run in enumerate(here):
            offset = 0.25 if len(here) == 1 else 0.15 + 0.3 * j / (len(here) - 1)
            placed.append((slot + offset, run))
    return placed


def _change(record: Recorded) -> str:
    change = Change.model_construct(  # stored, so valid: no second validation
        rounds=max(1, record.rounds), ratio=record.ratio, low=record.low, high=record.high
    )
    rounds = f"{record.rounds} round{'' if record.rounds == 1 else 's'}"
    return f"{percent(change)} {band_text(change)} from {record.base_sha[:7]} ({rounds})"


def _point(
    record: Recorded, slot: int, unit: str, label: str, href: Callable[[int], str]
) -> TrendPoint | None:
    value = _finite(record.value)
    if value is None:
        return None
    noise = band(value, record.ratio, record.low, record.high)
    where = f"{record.sha[:7]}" + (f" ({label})" if label else "")
    shown = time_text(value, unit)
    if noise is not None:
        shown += f" (band {time_text(noise.low, unit)} to {time_text(noise.high, unit)})"
    marked = f", marked {record.mark}" if record.mark else ""
    change = _change(record)
    title = f"{where} · {shown} · {change} · {record.verdict}{marked} · job #{record.job_id}"
    return TrendPoint(
        record.id, slot, record.sha, record.job_id, value, noise, change,
        record.verdict, record.mark, href(record.job_id), title,
    )  # fmt: skip


def _top(p: TrendPoint) -> float:
    """The top of what a marker marks: the point's band, or the point."""
    return p.band.high if p.band is not None else p.value


def markers(
    points: Sequence[TrendPoint], issue_row: IssueRow | None, issue: OpenIssue | None
) -> list[Marker]:
    """The row's marks: each marked point's (over its band), and where the open issue counts
    its slowdown from, linking to the issue."""
    out = [
        Marker(p.mark, p.id, float(p.slot), _top(p), f"{p.mark} at {p.sha[:7]}: {p.change}")
        for p in points
        if p.mark
    ]
    if issue_row is not None and issue is not None:
        number = f"issue #{issue.number}" if issue.number else "the regression issue"
        for p in points:
            if p.id == issue_row.start_id:
                label = f"{number}: {issue_row.kind} counted from {p.sha[:7]}"
                out.append(Marker("issue", p.id, float(p.slot), _top(p), label, issue.url))
    return out


def _pull_points(
    placed: Sequence[tuple[float, PullRun]], key: RowKey, unit: str, href: Callable[[int], str]
) -> list[PullPoint]:
    """The pull requests' runs that timed the row `key`, where they were placed."""
    out = []
    for slot, run in placed:
        value = run.times.get(key)
        if value is None:
            continue
        base = f" against {run.base_sha[:7]}" if run.base_sha else ""
        title = (
            f"pull request #{run.pr_number} · {run.sha[:7]}{base} · {time_text(value, unit)} · "
            f"job #{run.job_id}"
        )
        out.append(
            PullPoint(run.job_id, run.pr_number, run.sha, slot, value, href(run.job_id), title)
        )
    return out


def trend(
    records: Sequence[Recorded],
    runs: Mapping[str, CommitRun],
    pulls: Sequence[PullRun],
    issue: OpenIssue | None,
    href: Callable[[int], str],
) -> Trend:
    """The page's rows over its commits: `runs` says what ran each commit, `href` links a
    job's page (with its key where the repository is private). A row only pull requests
    timed (none of the default branch's runs has) comes last, with no point of its own; its
    device time only (the history keeps a host time for host-bound rows alone)."""
    shas, older = commit_axis(records)
    slot_of = {sha: i for i, sha in enumerate(shas)}
    first_seen: dict[str, datetime] = {}
    for record in sorted(records, key=lambda r: r.id):
        first_seen.setdefault(record.sha, record.created_at)
    commits = tuple(Commit(sha, i, commit_label(runs.get(sha))) for i, sha in enumerate(shas))
    placed = place_pulls(shas, first_seen, pulls)
    listed = {row.key: row for row in issue.rows} if issue is not None else {}
    measured = series(records)
    only_pulled = [k for _, r in placed for k in r.times if k not in measured and k[2] == "device"]
    rows = []
    for key in [*measured, *dict.fromkeys(only_pulled)]:
        unit = UNITS.get(key[2], "ms")
        drawn = [
            _point(r, slot_of[r.sha], unit, commits[slot_of[r.sha]].label, href)
            for r in measured.get(key, ())
            if r.sha in slot_of
        ]
        points = tuple(p for p in drawn if p is not None)
        issue_row = listed.get(key)
        marks = tuple(markers(points, issue_row, issue))
        beside = tuple(_pull_points(placed, key, unit, href))
        rows.append(RowTrend(*key, unit, points, beside, marks, issue_row))
    return Trend(commits, tuple(rows), older)


# -- the value axis -----------------------------------------------------------------------


@dataclass(frozen=True)
class Axis:
    """A linear scale from `lo` to `hi` and its labelled ticks (round numbers within it)."""

    lo: float
    hi: float
    ticks: tuple[float, ...]


def _step(span: float, count: int) -> float:
    """The round step (1, 2 or 5 times a power of ten) giving about `count` ticks over `span`."""
    raw = span / max(count, 1)
    power = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * power:
            return m * power
    return 10 * power


def value_axis(values: Sequence[float], count: int = 4) -> Axis:
    """The scale of a row's chart: every value within it with a margin of a tenth of their
    spread on each side (of a twentieth of the value where they are all one), never below
    zero, and its ticks at round numbers."""
    shown = [v for v in values if _finite(v) is not None]
    if not shown:
        return Axis(0.0, 1.0, (0.0, 0.5, 1.0))
    lo, hi = min(shown), max(shown)
    margin = (hi - lo) / 10 if hi > lo else hi / 20
    lo, hi = max(lo - margin, 0.0), hi + margin
    step = _step(hi - lo, count)
    first = math.ceil(lo / step) * step
    ticks = []
    at = first
    while at <= hi + step * 1e-9:
        ticks.append(round(at, 12))
        at += step
    return Axis(lo, hi, tuple(ticks))
