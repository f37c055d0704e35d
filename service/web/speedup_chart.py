"""The speedup charts: each finished job's geometric-mean speedup (with its 95 % interval
where it timed rounds) and the default branch's, per (operator, backend), drawn as inline SVG.
Pure functions over job rows."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape

from service.db.models import Job
from workflows.models import BenchmarkResult, Rounds


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


@dataclass(frozen=True)
class _Plot:
    """Where a chart places things: a job's point by its place in the pull requests' line
    (`placed`), a speedup by its height on the log scale from `lo` to `hi`."""

    placed: dict[int, int]  # job id → its place among the pull requests' points
    count: int  # the pull requests' points
    width: int
    height: int
    pad_l: int
    pad_r: int
    pad_t: int
    pad_b: int
    lo: float
    hi: float

    def y(self, v: float) -> float:
        span = math.log(self.hi) - math.log(self.lo)
        inner = self.height - self.pad_t - self.pad_b
        return self.pad_t + inner * (1 - (math.log(v) - math.log(self.lo)) / span)

    def x(self, p: ChartPoint, shift: float) -> float:
        inner, i, n = self.width - self.pad_l - self.pad_r, self.placed[p.job_id], self.count
        return shift + self.pad_l + (inner / 2 if n == 1 else inner * i / (n - 1))

    def line(self, of: Sequence[ChartPoint], kind: str, shift: float) -> str:
        coords = " ".join(f"{self.x(p, shift):.1f},{self.y(p.speedup):.1f}" for p in of)
        return f'<polyline points="{coords}" class="{kind}"/>'

    def point(self, p: ChartPoint, kind: str, label: str, shift: float) -> str:
        cx, cy = self.x(p, shift), self.y(p.speedup)
        out = [f'<g class="point {kind}" data-job="{p.job_id}"><title>{escape(label)}</title>']
        if p.low is not None and p.high is not None:
            low, high = self.y(p.low), self.y(p.high)
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

    def frame(self) -> list[str]:
        """The SVG's opening, the dashed 1.0x line and the scale's three labels."""
        one = self.y(1.0)
        left = self.pad_l - 4
        return [
            f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {self.width} {self.height}" '
            f'width="{self.width}" height="{self.height}" role="img" class="chart">',
            f'<line x1="{self.pad_l}" x2="{self.width - self.pad_r}" y1="{one:.1f}" '
            f'y2="{one:.1f}" class="one"/>',
            f'<text x="{left}" y="{one + 4:.1f}" text-anchor="end">1.0x</text>',
            f'<text x="{left}" y="{self.pad_t + 8}" text-anchor="end">{self.hi:.2g}x</text>',
            f'<text x="{left}" y="{self.height - self.pad_b}" text-anchor="end">'
            f"{self.lo:.2g}x</text>",
        ]

    def legend(self) -> str:
        """The two lines' legend (drawn only with the default branch's line)."""
        pad_l = self.pad_l
        return (
            f'<g class="legend"><line x1="{pad_l}" x2="{pad_l + 18}" y1="9" y2="9" class="line"/>'
            f'<text x="{pad_l + 22}" y="12">pull request</text>'
            f'<line x1="{pad_l + 110}" x2="{pad_l + 128}" y1="9" y2="9" class="line base"/>'
            f'<circle cx="{pad_l + 119}" cy="9" r="3" class="base"/>'
            f'<text x="{pad_l + 132}" y="12">default branch (the merge bases measured)</text>'
            "</g>"
        )


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
    beside = 6.0  # how far right of its job's point a base point stands
    values = [v for p in (*points, *base) for v in (p.speedup, p.low, p.high) if v is not None]
    plot = _Plot(
        placed,
        len(points),
        width,
        height,
        pad_l=44,
        pad_r=16 if base else 10,
        pad_t=24 if base else 10,
        pad_b=22,
        lo=min([*values, 1.0]) / 1.25,
        hi=max([*values, 1.0]) * 1.25,
    )
    parts = plot.frame()
    if base:
        parts.append(plot.legend())
        parts.append(plot.line(base, "line base", beside))
        parts.extend(
            plot.point(
                b, "base", f"default branch · {b.sha[:7]} · {_label(b)} · job #{b.job_id}", beside
            )
            for b in base
        )
    parts.append(plot.line(points, "line", 0.0))
    parts.extend(
        plot.point(p, "pr", f"job #{p.job_id} · {p.sha[:7]} · {_label(p)}", 0.0) for p in points
    )
    first, last = points[0], points[-1]
    parts.append(
        f'<text x="{plot.pad_l}" y="{height - 6}">{escape(first.sha[:7])}</text>'
        f'<text x="{width - plot.pad_r}" y="{height - 6}" text-anchor="end">'
        f"{escape(last.sha[:7])} · {_times(last.speedup)}</text>"
    )
    parts.append("</svg>")
    return "".join(parts)
