"""A row's history on the default branch, and what it says: pure.

Each default-branch run compares an operator with the last default-branch commit that ran it
(exactly that commit), so each of a row's points is one *link*: the change from its
`base_sha` to its `sha`, with the comparison's 95 % interval. Walking back from the newest
point through `base_sha` gives a chain of links whose product is the change over all of them.

- **One commit**: a link judged slower beyond noise (the pull-request report's rule and
  threshold, `verdicts.judge`) is a regression of that commit.
- **A drift**: the window (the row's last `size` links since the last one flagged on its own
  or by a drift) chained and judged by the same rule. The chain's ratio is the product of the
  links' and its interval adds the links' half-widths on a log scale in quadrature (each
  comparison's median is taken as about normal on that scale, and separate runs as
  independent): a 95 % interval for the product. A drift found marks its newest link, so the
  next window starts after it and the same drift fires once.
- **Recovered**: a slowdown's rows (from the link it started at) chained to the newest link and
  judged no longer slower: the same change, or faster.

A chain stops where a link is missing (a run that gave no result for the row, so no link has
that commit as its end); an open interval (too few rounds) makes the chain's open, which
judges as too noisy: nothing fires on it, and nothing is found recovered across it."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from report.verdicts import Verdict, judge
from workflows.models import Change

SLOWER, FASTER, DRIFT = "slower", "faster", "drift"  # a point's mark


@dataclass(frozen=True)
class Point:
    """One link of a row's series: `base_sha` → `sha`, its change and verdict, and `mark`
    where a window starts after it."""

    id: int
    sha: str
    base_sha: str
    change: Change
    verdict: Verdict
    mark: str | None = None


def mark_of(verdict: Verdict) -> str | None:
    """A link flagged on its own marks itself (a drift window never crosses it)."""
    return {Verdict.slower: SLOWER, Verdict.faster: FASTER}.get(verdict)


def chain(links: Sequence[Change]) -> Change:
    """The change over consecutive links, oldest first: the product of their ratios, its
    interval the links' half-widths on a log scale added in quadrature (each side apart);
    open where any link's is. One link is itself."""
    if not links:
        raise ValueError("a chain of no link")
    if len(links) == 1:
        return links[0]
    rounds = min(link.rounds for link in links)
    center = sum(math.log(link.ratio) for link in links)
    widths = [_half_widths(link) for link in links]
    if any(w is None for w in widths):
        return Change(rounds=rounds, ratio=math.exp(center), low=None, high=None)
    below = math.sqrt(sum(w[0] ** 2 for w in widths if w is not None))
    above = math.sqrt(sum(w[1] ** 2 for w in widths if w is not None))
    return Change(
        rounds=rounds,
        ratio=math.exp(center),
        low=math.exp(center - below),
        high=math.exp(center + above),
    )


def _half_widths(change: Change) -> tuple[float, float] | None:
    """The interval's two half-widths on a log scale (below, above); None when open."""
    low, high = change.low, change.high
    if low is None or high is None or not 0 < low <= change.ratio <= high:
        return None
    return math.log(change.ratio / low), math.log(high / change.ratio)


def back_from(points: Iterable[Point], newest: Point) -> list[Point]:
    """The chain ending at `newest`, newest first: from each link to the one that ends at its
    base (the latest such), until none does. Each commit is taken once (a cycle cannot
    loop)."""
    ending: dict[str, Point] = {}
    for point in sorted(points, key=lambda p: p.id):
        ending[point.sha] = point  # the latest link ending at a commit
    walked = [newest]
    seen = {newest.sha}
    while (before := ending.get(walked[-1].base_sha)) is not None and before.sha not in seen:
        walked.append(before)
        seen.add(before.sha)
    return walked


@dataclass(frozen=True)
class Drift:
    """A drift found: the window's links, oldest first, and their chained change."""

    links: tuple[Point, ...]
    change: Change

    @property
    def since(self) -> str:
        """The commit the drift is counted from (the base of its oldest link)."""
        return self.links[0].base_sha


def window(points: Iterable[Point], newest: Point, size: int) -> list[Point]:
    """The drift test's links ending at `newest`, oldest first: at most `size`, none marked
    (a link flagged on its own or by an earlier drift ends the walk); none when `newest` is
    itself marked."""
    if newest.mark is not None:
        return []
    links: list[Point] = []
    for point in back_from(points, newest):
        if point.mark is not None or len(links) == size:
            break
        links.append(point)
    return links[::-1]


def find_drift(points: Iterable[Point], newest: Point, size: int, threshold: float) -> Drift | None:
    """A drift over the window ending at `newest`: two links or more (one is the commit's own
    verdict) whose chain is slower beyond noise at `threshold`."""
    links = window(points, newest, size)
    if len(links) < 2:
        return None
    change = chain([p.change for p in links])
    if judge(change, threshold) is not Verdict.slower:
        return None
    return Drift(tuple(links), change)


def since(points: Iterable[Point], newest: Point, start_id: int) -> list[Point] | None:
    """The links from the one with id `start_id` through `newest`, oldest first; None when the
    chain back from `newest` does not reach it (a link is missing)."""
    walked = back_from(points, newest)
    for at, point in enumerate(walked):
        if point.id == start_id:
            return walked[: at + 1][::-1]
    return None


def recovered(
    points: Iterable[Point], newest: Point, start_id: int, threshold: float
) -> Change | None:
    """The change since a slowdown started (at the link `start_id`) when it no longer reads
    slower: the same within the threshold, or faster, judged as any row; None while it is
    still slower, too noisy to say, or the chain back does not reach its start."""
    links = since(points, newest, start_id)
    if links is None:
        return None
    change = chain([p.change for p in links])
    if judge(change, threshold) in (Verdict.same, Verdict.faster):
        return change
    return None
