"""The dashboard's speedup chart in a real browser (headless Chromium, the service's content
security policy): jobs whose comparisons timed rounds draw whiskers, and the merge bases they
measured draw the default branch's line, dashed with hollow points, under its legend."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.web.support import finish_job, new_job, result, run_job
from tests.web.test_browser import live, page  # noqa: F401  (fixtures used here)
from workflows.models import Rounds

pytestmark = pytest.mark.timeout(120)

CARD = '.chart-card[data-target="add:cpu"]'


def _rounds(median: float, low: float, high: float) -> Rounds:
    return Rounds(rounds=8, median=median, low=low, high=high)


def test_chart_whiskers_and_default_branch_in_a_browser(
    live: Any,  # noqa: F811
    page: Any,  # noqa: F811
    tmp_path: Path,
) -> None:
    from playwright.sync_api import expect

    runner = live.register("runner-one", ["cpu"])
    base_a, base_b = "a" * 40, "b" * 40
    measured = [
        ("1" * 40, None, None, None),  # an old job: no rounds, no whisker
        ("2" * 40, base_a, _rounds(1.6, 1.5, 1.7), _rounds(1.40, 1.36, 1.44)),
        ("3" * 40, base_b, _rounds(1.3, 1.2, 1.45), _rounds(1.35, 1.31, 1.39)),
        ("4" * 40, base_a, _rounds(1.5, 1.4, 1.55), _rounds(1.38, 1.34, 1.42)),
    ]
    jobs = []
    for sha, base, rounds, before in measured:
        job, _ = live.service.jobs.create_job(new_job(sha=sha, base_sha=base))
        run_job(live, runner, job.id)
        done = result(sha, (1.2, 1.2), failed=False, rounds=rounds, before=before)
        finish_job(live, runner, job.id, done)
        jobs.append(job)

    page.goto(f"{live.url}/")
    chart = page.locator(f"{CARD} svg")
    expect(chart).to_be_visible()
    expect(page.locator("p.muted", has_text="whisker")).to_contain_text("default branch")
    pr = chart.locator("g.point.pr")
    expect(pr).to_have_count(4)
    expect(pr.locator("line.whisker")).to_have_count(3)
    expect(chart.locator(f'g.point.pr[data-job="{jobs[0].id}"] line')).to_have_count(0)
    whisker = chart.locator(f'g.point.pr[data-job="{jobs[1].id}"] line.whisker')
    box = whisker.bounding_box()
    assert box is not None and box["height"] > 5  # drawn, not a dot
    title = chart.locator(f'g.point.pr[data-job="{jobs[1].id}"] title')
    expect(title).to_have_text(f"job #{jobs[1].id} · 2222222 · 1.60x (95 % 1.50–1.70x, 8 rounds)")

    # the default branch: base A measured twice counts once, as the later job measured it
    base = chart.locator("g.point.base")
    expect(base).to_have_count(2)
    assert base.evaluate_all("gs => gs.map(g => g.dataset.job)") == [
        str(jobs[2].id),
        str(jobs[3].id),
    ]
    expect(base.locator("line.whisker")).to_have_count(2)
    expect(base.nth(1).locator("title")).to_contain_text("default branch · aaaaaaa · 1.38x")
    line = chart.locator("polyline.line.base")
    expect(line).to_be_visible()
    style = "el => [getComputedStyle(el).strokeDasharray, getComputedStyle(el).stroke]"
    dashes, stroke = line.evaluate(style)
    assert dashes not in ("", "none") and stroke != "rgb(9, 105, 218)"  # dashed, not the PR's blue
    fill = base.first.locator("circle").evaluate("el => getComputedStyle(el).fill")
    assert fill == "rgb(255, 255, 255)"  # hollow
    expect(chart.locator("g.legend")).to_contain_text("default branch")

    page.screenshot(path=str(tmp_path / "dashboard.png"), full_page=True)  # to look at by hand
