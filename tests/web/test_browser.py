"""The pages in a real browser (headless Chromium through Playwright), under the service's own
content security policy: the dashboard and its filter, the rendered report (no raw Markdown, no
marker, hostile text shown as text and never run), a job page following its job with no
reload by the test (live.js: state, steps, log tail, then the report), and the HTML GitHub keeps
in a result comment (its `<sub>` footer) rendered as elements on the job page and on the
sandbox's pull-request page."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.service.helpers import LiveService, live_service, service_settings, sqlite_at_head
from tests.service.test_flow import BOT, REPO, make_flow
from tests.web.support import finish_job, new_job, result, run_job

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def live(tmp_path: Any) -> Iterator[LiveService]:
    settings = service_settings(sqlite_at_head(tmp_path / "web.db"), process_workers=False)
    with live_service(settings) as service:
        yield service


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page; any CSP violation or script error it reports fails the test."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.problems = problems
    yield page
    context.close()
    assert not problems, problems


def test_dashboard_in_a_browser(live: LiveService, page: Any) -> None:
    from playwright.sync_api import expect

    runner = live.register("runner-one", ["cpu"])
    done, _ = live.service.jobs.create_job(new_job(sha="1" * 40))
    run_job(live, runner, done.id)
    finish_job(live, runner, done.id, result("1" * 40, (1.5, 2.5), failed=False))
    running, _ = live.service.jobs.create_job(new_job(op="mul", sha="2" * 40))
    run_job(live, runner, running.id)
    waiting, _ = live.service.jobs.create_job(new_job(op="sub", sha="3" * 40))

    page.goto(f"{live.url}/")
    expect(page.locator("h1")).to_have_text("On-demand kernel tests")
    cpu = page.locator('.queue[data-backend="cpu"]')
    expect(cpu.locator("h3")).to_contain_text("1 queued · 1 runner online")
    expect(cpu.locator(f'a[href="/jobs/{waiting.id}"]')).to_be_visible()
    expect(page.locator("#runners")).to_contain_text("runner-one")
    expect(page.locator(f'#runners a[href="/jobs/{running.id}"]')).to_be_visible()
    chart = page.locator('.chart-card[data-target="add:cpu"] svg')
    expect(chart).to_be_visible()
    assert chart.bounding_box()["width"] > 200
    expect(page.locator("#history tr")).to_have_count(4)  # header + 3 jobs

    page.select_option('select[name="op"]', "mul")
    page.click("form.filter button")
    page.wait_for_url("**/?*op=mul*")
    expect(page.locator("#history tr")).to_have_count(2)
    expect(page.locator("#history")).to_contain_text("mul")


def test_rendered_report_in_a_browser(live: LiveService, page: Any) -> None:
    from playwright.sync_api import expect

    runner = live.register("runner-one", ["cpu"])
    job, _ = live.service.jobs.create_job(new_job())
    run_job(live, runner, job.id)
    finish_job(live, runner, job.id, result("a" * 40))

    page.goto(f"{live.url}/jobs/{job.id}")
    report = page.locator("#report")
    expect(report.locator("h3")).to_contain_text("add")
    expect(report.locator("table").first).to_be_visible()
    text = report.inner_text()
    assert "###" not in text and "**" not in text and "|---" not in text  # no raw Markdown
    assert "ondemand:add:cpu" not in page.content().split('id="report"', 1)[1]
    assert "<script>alert('owned')</script>" in text  # the hostile message, shown as text
    assert report.locator("script, img").count() == 0
    assert page.evaluate("typeof window.owned") == "undefined"
    expect(page.locator("#state")).to_have_text("failed")
    expect(page.locator('#timeline li[data-step="accuracy"]')).to_have_class("failed")


def test_job_page_follows_its_job(live: LiveService, page: Any) -> None:
    from playwright.sync_api import expect

    runner = live.register("runner-one", ["cpu"])
    runner_id = runner[0]
    job, _ = live.service.jobs.create_job(new_job())
    # The page's clock is the test's: after each change its next two-second poll is due at
    # once (`fast_forward`), instead of waited for.
    page.clock.install()
    page.goto(f"{live.url}/jobs/{job.id}")
    expect(page.locator("#state")).to_have_text("queued")

    run_job(live, runner, job.id, b"[ondemand] step accuracy: python -m pytest (timeout 60s)\n")
    page.clock.fast_forward(2000)
    expect(page.locator("#state")).to_have_text("running", timeout=10_000)
    expect(page.locator('#timeline li[data-step="accuracy"]')).to_have_class("running")
    expect(page.locator("#runner")).to_have_text("runner-one")
    line = b"tests/test_add.py::test_add[float32] PASSED\n"
    size = live.service.logs.size(job.id)
    live.service.logs.append(runner_id, job.id, size, line)
    page.clock.fast_forward(2000)
    expect(page.locator("#log")).to_contain_text("test_add[float32] PASSED", timeout=10_000)

    finish_job(live, runner, job.id, result("a" * 40, failed=False))
    page.clock.fast_forward(2000)
    expect(page.locator("#state")).to_have_text("succeeded", timeout=10_000)
    expect(page.locator("#report h3")).to_contain_text("add")
    expect(page.locator('#timeline li[data-step="benchmark"]')).to_have_class("succeeded")


def test_footer_is_rendered_as_github_renders_it(tmp_path: Any, page: Any) -> None:
    from playwright.sync_api import expect

    footer = "Arithmetic mean speedup: 1.64x, as FlagGems reports it."
    with make_flow(tmp_path) as flow:
        flow.comment("/test add:cpu")
        flow.wait_until(lambda: len(flow.jobs()) == 1)
        job = flow.jobs()[0]
        runner = flow.svc.register("gpu-one", ["cpu"])
        run_job(flow.svc, runner, job.id)
        done = result(flow.head, (1.5, 1.78))
        assert done.benchmark is not None and done.benchmark.performance
        finish_job(flow.svc, runner, job.id, done)
        flow.wait_until(lambda: f"<sub>{footer}</sub>" in flow.bot_comments()[0]["body"])
        flow.wait_until(flow.quiet)

        pages = {
            f"{flow.svc.url}/jobs/{job.id}": "#report",
            f"{flow.admin.base_url}/{REPO}/pull/{flow.pr}": f'.comment[data-user="{BOT}"] .body',
        }
        for url, report in pages.items():
            page.goto(url)
            expect(page.locator(report).locator("sub", has_text=footer)).to_have_text(footer)
            expect(page.locator("sub")).to_have_count(1)
            text = page.locator("body").inner_text()
            assert footer in text and "<sub>" not in text and "</sub>" not in text, url
            assert "<script>alert('owned')</script>" in text, url  # the hostile message, as text
            assert page.locator(report).locator("script, img").count() == 0, url
            assert page.evaluate("typeof window.owned") == "undefined"
