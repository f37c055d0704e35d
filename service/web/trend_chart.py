"""A row's trend drawn as inline SVG: its time at each default-branch commit (a line through
the points, each with its noise band, the bands joined into a shaded area where consecutive),
the pull requests' runs beside the commits they were compared with, the regressions marked and
the value axis. Every point links to its job's page and says what it is on hover (`<title>`);
every text is escaped. Pure: a small plot class places things, functions draw them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from service.web.trend_views import (
    Axis,
    Marker,
    PullPoint,
    RowTrend,
    TrendPoint,
    time_text,
    value_axis,
)

WIDTH, HEIGHT = 760, 220
PAD_L, PAD_R, PAD_T, PAD_B = 64, 12, 30, 28
LABEL_PX = 56  # the room a commit's short SHA takes under the axis


@dataclass(frozen=True)
class _Plot:
    """Where a row's chart places things: a slot of the commit axis (commit i at i, a pull
    request's run between i and i + 1) across, a time up the linear `axis`."""

    commits: int
    axis: Axis
    width: int = WIDTH
    height: int = HEIGHT

    def x(self, slot: float) -> float:
        inner = self.width - PAD_L - PAD_R
        return PAD_L + inner * (slot + 0.5) / max(self.commits, 1)

    def y(self, value: float) -> float:
        inner = self.height - PAD_T - PAD_B
        span = (self.axis.hi - self.axis.lo) or 1.0
        return PAD_T + inner * (1 - (value - self.axis.lo) / span)


def _values(row: RowTrend) -> list[float]:
    out = [p.value for p in row.points] + [p.value for p in row.pulls]
    for p in row.points:
        if p.band is not None:
            out.extend((p.band.low, p.band.high))
    return out


def _grid(plot: _Plot, unit: str) -> list[str]:
    """The value axis: a faint line and a label at each tick."""
    out = ['<g class="grid">']
    for tick in plot.axis.ticks:
        y = plot.y(tick)
        out.append(
            f'<line x1="{PAD_L}" x2="{plot.width - PAD_R}" y1="{y:.1f}" y2="{y:.1f}"/>'
            f'<text x="{PAD_L - 6}" y="{y + 3.5:.1f}" text-anchor="end">'
            f"{escape(time_text(tick, unit))}</text>"
        )
    out.append("</g>")
    return out


def _band_areas(plot: _Plot, points: Sequence[TrendPoint]) -> list[str]:
    """The bands of consecutive points joined into shaded areas (a point without a band, too
    few rounds for an interval, breaks the area)."""
    runs: list[list[TrendPoint]] = [[]]
    for p in points:
        if p.band is None:
            runs.append([])
        else:
            runs[-1].append(p)
    out = []
    for run in runs:
        if len(run) < 2:
            continue
        top = [f"{plot.x(p.slot):.1f},{plot.y(p.band.high):.1f}" for p in run if p.band]
        bottom = [f"{plot.x(p.slot):.1f},{plot.y(p.band.low):.1f}" for p in run[::-1] if p.band]
        out.append(f'<polygon class="band-area" points="{" ".join(top + bottom)}"/>')
    return out


def _main_point(plot: _Plot, p: TrendPoint) -> str:
    cx, cy = plot.x(p.slot), plot.y(p.value)
    out = [
        f'<a href="{escape(p.href)}" aria-label="{escape(p.title)}">'
        f'<g class="point main {escape(p.verdict)}" '
        f'data-point="{p.id}" data-job="{p.job_id}" data-sha="{escape(p.sha)}">'
        f"<title>{escape(p.title)}</title>"
    ]
    if p.band is not None:
        top, bottom = plot.y(p.band.high), plot.y(p.band.low)
        out.append(
            f'<rect class="band" x="{cx - 4:.1f}" y="{top:.1f}" width="8" '
            f'height="{max(bottom - top, 1.0):.1f}"/>'
        )
    out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4"/></g></a>')
    return "".join(out)


def _pull_point(plot: _Plot, p: PullPoint) -> str:
    cx, cy = plot.x(p.slot), plot.y(p.value)
    diamond = (
        f"M{cx:.1f},{cy - 4.5:.1f} L{cx + 4.5:.1f},{cy:.1f} "
        f"L{cx:.1f},{cy + 4.5:.1f} L{cx - 4.5:.1f},{cy:.1f} Z"
    )
    return (
        f'<a href="{escape(p.href)}" aria-label="{escape(p.title)}">'
        f'<g class="point pull" data-job="{p.job_id}" '
        f'data-pr="{p.pr_number}"><title>{escape(p.title)}</title>'
        f'<path d="{diamond}"/></g></a>'
    )


def _marker(plot: _Plot, m: Marker) -> str:
    """A mark's triangle over what it marks; the issue's a dashed line down the commit, with
    its link."""
    cx = plot.x(m.slot)
    title = f"<title>{escape(m.label)}</title>"
    if m.kind == "issue":
        drawn = (
            f'<g class="marker issue" data-point="{m.point_id}">{title}'
            f'<line x1="{cx:.1f}" x2="{cx:.1f}" y1="{PAD_T - 6}" y2="{plot.height - PAD_B}"/>'
            f'<text x="{cx + 3:.1f}" y="{PAD_T - 8}">issue</text></g>'
        )
        if m.href:
            return f'<a href="{escape(m.href)}" aria-label="{escape(m.label)}">{drawn}</a>'
        return drawn
    top = plot.y(m.value) - 7
    tri = f"M{cx - 5:.1f},{top - 7:.1f} L{cx + 5:.1f},{top - 7:.1f} L{cx:.1f},{top:.1f} Z"
    return (
        f'<g class="marker {escape(m.kind)}" data-point="{m.point_id}">{title}<path d="{tri}"/></g>'
    )


def _commit_labels(plot: _Plot, points: Sequence[TrendPoint]) -> list[str]:
    """Short SHAs under the axis, as many as fit (always the first and the last point's)."""
    if not points:
        return []
    every = max(1, -(-LABEL_PX * plot.commits // (plot.width - PAD_L - PAD_R)))
    last = points[-1].slot
    shown = [
        p for p in points if (p.slot % every == 0 and last - p.slot >= every) or p is points[-1]
    ]
    out = []
    for p in shown:
        x, anchor = plot.x(p.slot), "middle"
        if x + LABEL_PX / 2 > plot.width:  # the last, near the edge: kept whole
            x, anchor = plot.width - 2, "end"
        out.append(
            f'<text class="commit" x="{x:.1f}" y="{plot.height - 8}" '
            f'text-anchor="{anchor}">{escape(p.sha[:7])}</text>'
        )
    return out


def _legend(has_pulls: bool) -> str:
    out = [
        '<g class="legend">',
        f'<circle cx="{PAD_L + 5}" cy="10" r="4" class="key-main"/>',
        f'<text x="{PAD_L + 13}" y="14">default branch (band: 95 % interval)</text>',
    ]
    if has_pulls:
        x = PAD_L + 230
        out.append(
            f'<path d="M{x},5.5 L{x + 4.5},10 L{x},14.5 L{x - 4.5},10 Z" class="key-pull"/>'
            f'<text x="{x + 9}" y="14">pull request runs</text>'
        )
    out.append("</g>")
    return "".join(out)


def trend_svg(row: RowTrend, commits: int, index: int) -> str:
    """A row's chart over `commits` commits; `index` makes its title's id unique on the page.
    A group, not an image: its points are links, each named by its title."""
    plot = _Plot(commits, value_axis(_values(row)))
    title_id = f"trend-title-{index}"
    what = "host time" if row.metric == "host" else "device time"
    heading = f"{row.dtype} {row.shape}: {what} over {len(row.points)} default-branch commits"
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {plot.width} {plot.height}" '
        f'width="{plot.width}" height="{plot.height}" role="group" class="chart trend" '
        f'aria-labelledby="{title_id}"><title id="{title_id}">{escape(heading)}</title>',
        _legend(bool(row.pulls)),
        *_grid(plot, row.unit),
        *_band_areas(plot, row.points),
    ]
    coords = " ".join(f"{plot.x(p.slot):.1f},{plot.y(p.value):.1f}" for p in row.points)
    parts.append(f'<polyline class="line" points="{coords}"/>')
    parts.extend(_marker(plot, m) for m in row.markers if m.kind == "issue")
    parts.extend(_main_point(plot, p) for p in row.points)
    parts.extend(_pull_point(plot, p) for p in row.pulls)
    parts.extend(_marker(plot, m) for m in row.markers if m.kind != "issue")
    parts.extend(_commit_labels(plot, row.points))
    parts.append("</svg>")
    return "".join(parts)
