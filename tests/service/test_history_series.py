"""A row's history on the default branch as pure functions: links chained (the product of their
ratios, their log half-widths in quadrature), the drift test over the window (found once, not
across a flagged link or a gap, never in A/A noise, always for +4 % a run by the fifth), and a
slowdown found recovered."""

from __future__ import annotations

import math
import random

import pytest

from report.verdicts import Verdict, judge
from service.history.series import (
    DRIFT,
    Point,
    back_from,
    chain,
    find_drift,
    mark_of,
    recovered,
    since,
    window,
)
from workflows.models import Change

THRESHOLD = 0.10


def link(ratio: float, band: float = 0.01, rounds: int = 8) -> Change:
    """A comparison's change of `ratio` with a symmetric ±`band` interval on a log scale."""
    return Change(rounds=rounds, ratio=ratio, low=ratio / (1 + band), high=ratio * (1 + band))


def series(ratios: list[float], band: float = 0.01) -> list[Point]:
    """Links c0→c1→…, each judged on its own and marked as the recorder marks them."""
    points = []
    for i, ratio in enumerate(ratios):
        change = link(ratio, band)
        verdict = judge(change, THRESHOLD)
        points.append(Point(i + 1, f"c{i + 1}", f"c{i}", change, verdict, mark_of(verdict)))
    return points


def test_a_chain_multiplies_ratios_and_adds_log_half_widths_in_quadrature() -> None:
    one = link(1.04, 0.02)
    assert chain([one]) == one
    made = chain([link(1.04, 0.02), link(1.05, 0.01), link(0.98, 0.02)])
    assert made.ratio == pytest.approx(1.04 * 1.05 * 0.98)
    half = math.sqrt(3 * math.log(1.02) ** 2 - math.log(1.02) ** 2 + math.log(1.01) ** 2)
    assert math.log(made.ratio / made.low) == pytest.approx(half)  # type: ignore[operator]
    assert math.log(made.high / made.ratio) == pytest.approx(half)  # type: ignore[operator]
    opened = chain([link(1.04), Change(rounds=3, ratio=1.02, low=None, high=None)])
    assert opened.low is None and opened.rounds == 3 and judge(opened, THRESHOLD) is Verdict.noisy
    with pytest.raises(ValueError):
        chain([])


def test_a_drift_of_four_percent_a_run_is_found_once_by_the_window() -> None:
    points = series([1.04] * 5)
    assert all(p.verdict is Verdict.same for p in points)  # no run beyond the threshold alone
    found: list[int] = []
    marked: list[Point] = []
    for point in points:
        drift = find_drift([*marked, point], point, 8, THRESHOLD)
        if drift is not None:
            found.append(point.id)
            assert drift.change.ratio == pytest.approx(1.04**3)
            assert drift.since == "c0" and drift.links[-1] is point
            point = Point(point.id, point.sha, point.base_sha, point.change, point.verdict, DRIFT)
        marked.append(point)
    # 1.04³ = +12.5 %, and its interval (±1.7 %) lies beyond 10 %: the third run finds it;
    # the runs after it start a new window (+8.2 % in two: nothing yet).
    assert found == [3]
    again = series([1.04] * 5 + [1.0, 1.04])[5:]
    assert find_drift([*marked, *again], again[-1], 8, THRESHOLD) is not None  # a new +12.5 %


def test_a_flagged_link_or_a_gap_ends_the_window() -> None:
    points = series([1.04, 1.04, 1.30, 1.04, 1.04])
    assert points[2].mark == "slower"
    assert [p.id for p in window(points, points[4], 8)] == [4, 5]  # not across the flagged one
    assert window(points, points[2], 8) == []  # a flagged link is judged on its own
    gap = [p for p in points if p.id != 4]  # the run of c4 gave no result for the row
    assert [p.id for p in window(gap, points[4], 8)] == [5]
    assert find_drift(gap, points[4], 8, THRESHOLD) is None  # one link is the run's own verdict
    assert [p.id for p in window(series([1.01] * 12), series([1.01] * 12)[-1], 8)] == list(
        range(5, 13)
    )  # at most the window's size


def test_a_series_of_a_a_noise_finds_no_drift_and_a_real_drift_always() -> None:
    """2,000 windows of A/A links (each ratio off by a normal 1 % on a log scale, an interval
    of ±2 %) find no drift; a +4 % drift with that noise is found by its fifth run in all
    but a few of 200 series (its chained interval's low end lies 2.5 standard deviations above
    the threshold)."""
    rng = random.Random(7)

    def noisy(true: float) -> float:
        return true * math.exp(rng.gauss(0, 0.01))

    false_alarms = 0
    for _ in range(2000):
        points = series([noisy(1.0) for _ in range(8)], band=0.02)
        false_alarms += find_drift(points, points[-1], 8, THRESHOLD) is not None
    assert false_alarms == 0
    found = 0
    for _ in range(200):
        points = series([noisy(1.04) for _ in range(5)], band=0.02)
        assert all(p.verdict is not Verdict.slower for p in points)
        found += find_drift(points, points[-1], 8, THRESHOLD) is not None
    assert found >= 196


def test_a_slowdown_recovers_when_the_change_since_it_started_is_back_within_the_threshold() -> (
    None
):
    points = series([1.0, 2.0, 1.02, 0.5])
    start = points[1]
    assert start.mark == "slower"
    assert recovered(points[:2], start, start.id, THRESHOLD) is None  # the slowdown itself
    assert recovered(points[:3], points[2], start.id, THRESHOLD) is None  # still slower
    back = recovered(points, points[3], start.id, THRESHOLD)
    assert back is not None and back.ratio == pytest.approx(2.0 * 1.02 * 0.5)
    assert [p.id for p in since(points, points[3], start.id) or []] == [2, 3, 4]
    gap = [points[0], points[1], points[3]]  # the run between gave no result: no chain back
    assert recovered(gap, points[3], start.id, THRESHOLD) is None
    noisy = [*points[:3], Point(4, "c4", "c3", link(0.5, 0.3), Verdict.noisy)]
    assert recovered(noisy, noisy[3], start.id, THRESHOLD) is None  # too noisy to say


def test_the_chain_back_follows_bases_not_the_order_of_arrival() -> None:
    a = Point(1, "c1", "c0", link(1.0), Verdict.same)
    c = Point(2, "c3", "c2", link(1.0), Verdict.same)  # c3's run ended before c2's
    b = Point(3, "c2", "c1", link(1.0), Verdict.same)
    assert [p.sha for p in back_from([a, c, b], c)] == ["c3", "c2", "c1"]
