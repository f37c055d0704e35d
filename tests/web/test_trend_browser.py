"""An operator's trend page in a real browser (headless Chromium, the service's content
security policy, no console error): each row's points with their bands drawn, the pull
requests' runs beside them, the marks over the points they mark, every link pointing where it
should (a point to its job's page, the issue's line to GitHub), a row measured once saying so
with its numbers shown, and the dashboard's link leading to the page."""

from __future__ import annotations

from typing import Any

import pytest

from tests.service.helpers import LiveService
from tests.web.test_browser import live, page  # noqa: F401  (fixtures used here)
from tests.web.trend_seed import BIG, COMMITS, seed_history

pytestmark = pytest.mark.timeout(120)


def test_trend_page_in_a_browser(live: LiveService, page: Any) -> None:  # noqa: F811
    from playwright.sync_api import expect

    seeded = seed_history(live.service.db)
    page.goto(f"{live.url}/")
    page.click('#trends a[data-target="add:cpu"]')
    page.wait_for_url("**/trends/octo/kernels/add/cpu")
    answer = page.request.get(page.url)
    assert "default-src 'none'" in answer.headers["content-security-policy"]

    rows = page.locator("section.trend-row")
    expect(rows).to_have_count(3)
    big = rows.nth(0).locator("svg.trend")
    expect(big).to_be_visible()
    expect(big.locator("g.point.main")).to_have_count(5)
    bands = big.locator("rect.band")
    expect(bands).to_have_count(4)  # c3's comparison had too few rounds for an interval
    heights = bands.evaluate_all("rs => rs.map(r => r.getBoundingClientRect().height)")
    assert all(h > 2 for h in heights), heights
    area = big.locator("polygon.band-area")
    fill = area.evaluate("el => getComputedStyle(el).fillOpacity")
    assert 0 < float(fill) < 1  # shaded, not solid

    for sha, job_id in seeded.main_jobs.items():
        point = big.locator(f'g.point.main[data-sha="{sha}"]')
        assert point.locator("xpath=..").get_attribute("href") == f"/jobs/{job_id}"
        expect(point.locator("title")).to_contain_text(f"{sha[:7]} (push, merged #")
    pulls = big.locator("g.point.pull")
    expect(pulls).to_have_count(2)
    hrefs = pulls.evaluate_all("gs => gs.map(g => g.parentNode.getAttribute('href'))")
    assert hrefs == [f"/jobs/{job_id}" for job_id in seeded.pull_jobs]
    expect(pulls.first.locator("title")).to_contain_text(
        "pull request #21 · eeeeeee against 3333333"
    )

    slower_id = seeded.points[(BIG, "device", COMMITS[3])]
    marked = big.locator(f'g.point.main[data-point="{slower_id}"] circle').bounding_box()
    mark = big.locator(f'g.marker.slower[data-point="{slower_id}"]')
    expect(mark).to_be_visible()
    box = mark.bounding_box()
    assert marked is not None and box is not None
    assert box["y"] + box["height"] <= marked["y"]  # over the point
    assert abs(box["x"] + box["width"] / 2 - (marked["x"] + marked["width"] / 2)) < 1
    issue = big.locator("g.marker.issue")
    expect(issue).to_be_visible()
    link = issue.locator("xpath=..").get_attribute("href")
    assert link == "https://github.com/octo/kernels/issues/77"
    expect(rows.nth(1).locator("g.marker.drift")).to_be_visible()

    once = rows.nth(2)
    expect(once.locator(".not-enough")).to_contain_text("Not enough history")
    expect(once.locator("svg")).to_have_count(0)
    expect(once.locator("table tr.main")).to_be_visible()  # its numbers, shown
    expect(once.locator("table tr.main")).to_contain_text("35.5 µs")

    big.locator(f'g.point.main[data-sha="{COMMITS[2]}"]').click()
    page.wait_for_url(f"**/jobs/{seeded.main_jobs[COMMITS[2]]}")
