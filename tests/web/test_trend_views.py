"""The trend page's view code as pure functions: a point's band from its comparison's interval,
the commit axis, one point per commit and row, pull requests placed beside the commit they were
compared with, the markers, the value axis, and the chart drawn from them (points, bands,
markers and links, every text escaped)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from itertools import pairwise

import pytest

from service.db.models import Job
from service.links import Links, trends_path
from service.web.trend_chart import trend_svg
from service.web.trend_views import (
    Band,
    CommitRun,
    IssueRow,
    OpenIssue,
    PullRun,
    Recorded,
    band,
    commit_axis,
    commit_label,
    markers,
    place_pulls,
    pull_run,
    series,
    time_text,
    trend,
    value_axis,
)
from workflows.models import BenchmarkResult, BenchmarkRow, JobResult, JobStatus

SVG = "{http://www.w3.org/2000/svg}"
T0 = datetime(2026, 11, 1, tzinfo=UTC)


def rec(
    id: int,
    sha: str,
    value: float | None = 1.0,
    *,
    shape: str = "64",
    metric: str = "device",
    ratio: float = 1.0,
    half: float | None = 0.02,
    mark: str | None = None,
    base: str = "0",
) -> Recorded:
    """A stored point at minute `id`; its interval ±`half` of its ratio, open where None."""
    low = None if half is None else ratio * (1 - half)
    high = None if half is None else ratio * (1 + half)
    return Recorded(
        id=id, dtype="float32", shape=shape, metric=metric, sha=sha, base_sha=base,
        job_id=100 + id, rounds=8, ratio=ratio, low=low, high=high, value=value,
        verdict="slower" if mark == "slower" else "same", mark=mark,
        created_at=T0 + timedelta(minutes=id),
    )  # fmt: skip


def pull(job_id: int, minute: int, base: str | None, times: dict) -> PullRun:
    return PullRun(job_id, job_id - 200, "p" * 40, base, T0 + timedelta(minutes=minute), times)


def test_the_band_maps_the_change_interval_onto_the_time() -> None:
    # 1.1 ms after a change of 1.10x (1.05–1.20): before took 1.0 ms, so 1.05–1.20 ms
    assert band(1.1, 1.10, 1.05, 1.20) == Band(pytest.approx(1.05), pytest.approx(1.20))
    assert band(2.0, 1.0, 1.02, 0.98) == Band(pytest.approx(1.96), pytest.approx(2.04))
    assert band(1.0, 1.0, None, 1.1) is None  # too few rounds: an open interval
    assert band(1.0, 0.0, 0.9, 1.1) is None and band(float("nan"), 1.0, 0.9, 1.1) is None


def test_the_axis_orders_commits_as_recorded_and_keeps_the_newest() -> None:
    records = [rec(3, "b"), rec(1, "a"), rec(2, "a", shape="128"), rec(4, "c"), rec(5, "d")]
    assert commit_axis(records) == (["a", "b", "c", "d"], 0)
    assert commit_axis(records, limit=2) == (["c", "d"], 2)
    assert commit_label(CommitRun("push", 12)) == "push, merged #12"
    assert commit_label(CommitRun("nightly")) == "nightly" and commit_label(None) == ""


def test_a_series_holds_one_point_per_commit_rows_in_order_host_after_device() -> None:
    records = [
        rec(1, "a", shape="64", metric="host"),
        rec(2, "a", shape="64"),
        rec(3, "a", shape="8"),
        rec(4, "b", shape="64"),
        rec(5, "b", shape="64", value=9.0, base="a2"),  # b again, against another base
    ]
    rows = series(records)
    assert list(rows) == [
        ("float32", "64", "device"),
        ("float32", "64", "host"),
        ("float32", "8", "device"),
    ]
    assert [(r.sha, r.value) for r in rows[("float32", "64", "device")]] == [("a", 1.0), ("b", 9.0)]


def test_pull_requests_stand_beside_the_commit_they_were_compared_with() -> None:
    shas = ["a", "b", "c"]
    seen = {s: T0 + timedelta(minutes=10 * i) for i, s in enumerate(shas)}
    runs = [
        pull(201, 50, "b", {}),  # compared with b, made late: still beside b
        pull(202, 15, None, {}),  # no base known: the newest commit recorded before it, b
        pull(203, 25, "zzz", {}),  # a base not shown: by time, c
        pull(204, -5, None, {}),  # older than what is shown: left out
    ]
    placed = place_pulls(shas, seen, runs)
    assert [(slot, run.job_id) for slot, run in placed] == [
        (1.15, 202),  # two at b share its slot's right half, in the order they were made
        (1.45, 201),
        (2.25, 203),
    ]


def test_markers_mark_flagged_points_and_where_the_issue_counts_from() -> None:
    records = [rec(1, "a"), rec(2, "b", ratio=1.2, mark="slower"), rec(3, "c", mark="drift")]
    issue = OpenIssue(77, "https://github.test/o/r/issues/77",
                      (IssueRow("float32", "64", "device", "slower", 2, "b"),))  # fmt: skip
    shown = trend(records, {}, [], issue, lambda job_id: f"/jobs/{job_id}")
    (row,) = shown.rows
    marks = [(m.kind, m.point_id, m.slot) for m in row.markers]
    assert marks == [("slower", 2, 1.0), ("drift", 3, 2.0), ("issue", 2, 1.0)]
    slower = row.markers[0]
    assert slower.value == pytest.approx(row.points[1].band.high)  # over its band
    assert row.markers[2].href == "https://github.test/o/r/issues/77"
    assert "issue #77: slower counted from b" in row.markers[2].label
    assert row.issue_row is not None and row.issue_row.start_id == 2
    assert markers(row.points, None, None) == list(row.markers[:2])


def test_time_and_value_axis() -> None:
    assert time_text(1.23456, "ms") == "1.235 ms" and time_text(812.5, "µs") == "812.5 µs"
    assert time_text(12345.6, "ms") == "12,346 ms"
    axis = value_axis([1.0, 1.3])
    assert axis.lo == pytest.approx(0.97) and axis.hi == pytest.approx(1.33)
    assert axis.ticks == (1.0, 1.1, 1.2, 1.3)
    flat = value_axis([2.0])
    assert flat.lo < 2.0 < flat.hi and all(flat.lo <= t <= flat.hi for t in flat.ticks)
    assert value_axis([0.001, 0.002]).lo >= 0.0


def test_a_pull_requests_job_gives_its_rows_after_times() -> None:
    rows = [
        BenchmarkRow(
            dtype="float16",
            size=[8, 8],
            output_size=[4],
            reference_ms=1.0,
            kernel_ms=0.5,
            speedup=2.0,
            kernel_host_us=12.0,
        ),
    ]
    bench = BenchmarkResult(op="add", rows=rows, performance=True, merge_base="m" * 40)
    done = JobResult(status=JobStatus.succeeded, sha="s" * 40, benchmark=bench)
    job = Job(id=9, pr_number=4, sha="s" * 40, base_sha="b" * 40, created_at=T0,
              result=done.model_dump(mode="json"))  # fmt: skip
    run = pull_run(job)
    assert run is not None and run.base_sha == "m" * 40 and run.pr_number == 4
    assert run.times == {
        ("float16", "8×8 → 4", "device"): 0.5,
        ("float16", "8×8 → 4", "host"): 12.0,
    }
    interpreted = bench.model_copy(update={"performance": False})
    job.result = done.model_copy(update={"benchmark": interpreted}).model_dump(mode="json")
    assert pull_run(job) is None
    job.result = {"status": "nonsense"}
    assert pull_run(job) is None


def test_the_trend_draws_points_bands_pulls_and_markers_with_their_links() -> None:
    records = [
        rec(1, "a" * 40, 1.0),
        rec(2, "b" * 40, 1.01, half=None),  # too few rounds: no band
        rec(3, "c" * 40, 1.2, ratio=1.19, mark="slower"),
        rec(4, "c" * 40, 3.0, shape="<b>"),  # a row measured once
    ]
    runs = {"c" * 40: CommitRun("push", 12)}
    only = {("float32", "9", "device"): 5.0, ("float32", "9", "host"): 7.0}
    pulls = [pull(201, 2, "a" * 40, {("float32", "64", "device"): 1.1}), pull(202, 9, None, only)]
    issue = OpenIssue(None, None, (IssueRow("float32", "64", "device", "slower", 3, "c"),))
    links = Links("http://svc.test", b"k")
    shown = trend(records, runs, pulls, issue, lambda job_id: links.job_path(job_id, True))
    assert [c.label for c in shown.commits] == ["", "", "push, merged #12"]
    big, once, only_pulled = shown.rows  # no row of the pull request's host time alone
    assert big.enough and not once.enough and not only_pulled.enough
    assert [p.job_id for p in only_pulled.pulls] == [202] and not only_pulled.points
    assert big.points[1].band is None and big.points[2].band is not None
    assert big.points[0].href == f"/jobs/101?key={links.key(101)}"
    assert "push, merged #12" in big.points[2].title and "+19.0 %" in big.points[2].title

    svg = trend_svg(big, len(shown.commits), 0)
    root = ET.fromstring(svg)  # well-formed
    assert root.get("role") == "group" and root.get("aria-labelledby") == "trend-title-0"
    mains = root.findall(f".//{SVG}g[@class='point main same']") + root.findall(
        f".//{SVG}g[@class='point main slower']"
    )
    assert len(mains) == 3 and len(root.findall(f".//{SVG}rect[@class='band']")) == 2
    assert len(root.findall(f".//{SVG}polygon[@class='band-area']")) == 0  # no two in a row
    assert len(root.findall(f".//{SVG}g[@class='point pull']")) == 1
    assert len(root.findall(f".//{SVG}g[@class='marker slower']")) == 1
    assert len(root.findall(f".//{SVG}g[@class='marker issue']")) == 1  # no number: no link
    hrefs = [a.get("href") for a in root.iter(f"{SVG}a")]
    assert hrefs == [f"/jobs/{job_id}?key={links.key(job_id)}" for job_id in (101, 102, 103, 201)]
    named = [a.get("aria-label") for a in root.iter(f"{SVG}a")]
    assert named[0] == big.points[0].title and "pull request #1" in (named[-1] or "")
    titles = [t.text for t in root.iter(f"{SVG}title")]
    assert all(titles) and any("pull request #1" in (t or "") for t in titles)
    shaped = trend_svg(once, 3, 1)
    assert "&lt;b&gt;" in shaped and "<b>" not in shaped  # escaped


def test_paths_of_the_trend_pages() -> None:
    links = Links("http://svc.test", [b"new", b"old"])
    assert trends_path("o/r") == "/trends/o/r"
    assert trends_path("o/r", "a b", "cpu") == "/trends/o/r/a%20b/cpu"
    assert links.trends_path("o/r", False, "add", "cpu") == "/trends/o/r/add/cpu"
    keyed = links.trends_path("o/r", True)
    key = keyed.split("?key=")[1]
    assert links.opens_repo("o/r", True, key) and not links.opens_repo("o/x", True, key)
    assert not links.opens_repo("o/r", True, None) and links.opens_repo("o/r", False, None)
    assert Links("http://svc.test", [b"other", b"new"]).opens_repo("o/r", True, key)  # rotated
    assert key != links.key(1) and links.job_path(3, False) == "/jobs/3"


def test_a_long_history_labels_the_commits_that_fit_and_keeps_the_newest() -> None:
    records = [rec(i, f"{i:07d}" + "0" * 33, 1.0 + i / 100) for i in range(1, 81)]
    shown = trend(records, {}, [], None, lambda job_id: f"/jobs/{job_id}")
    assert len(shown.commits) == 60 and shown.older == 20  # the newest 60 drawn
    (row,) = shown.rows
    root = ET.fromstring(trend_svg(row, len(shown.commits), 0))
    labels = root.findall(f".//{SVG}text[@class='commit']")
    assert 5 <= len(labels) <= 14  # a short SHA needs about 56 px of the 684
    assert labels[-1].text == "0000080" and labels[0].text == "0000021"
    last = labels[-1]
    assert last.get("text-anchor") == "end" and float(last.get("x") or 0) <= 760
    xs = [float(t.get("x") or 0) for t in labels]
    assert all(b - a >= 50 for a, b in pairwise(xs))  # none overlaps
    ticks = root.findall(f".//{SVG}g[@class='grid']/{SVG}text")
    assert [t.text for t in ticks] == ["1.2 ms", "1.4 ms", "1.6 ms", "1.8 ms"]
