"""The job page and the dashboard over HTTP, on SQLite and PostgreSQL: the report rendered from
its Markdown with untrusted text escaped and the marker gone, the step timeline and log tail,
the live state as JSON, private jobs behind their key and never listed, the queue per backend,
runners and their jobs, the filterable history and the speedup charts."""

from __future__ import annotations

import re

import httpx

from service.web.page_views import timeline
from service.web.report_html import report_html
from tests.service.helpers import live_service, service_settings
from tests.web.support import HOSTILE, finish_job, new_job, result, run_job
from workflows.models import Progress


def test_report_html_renders_markdown_and_nothing_else() -> None:
    html = report_html(
        "<!-- ondemand:add:cpu -->\n### ❌ `add` on `cpu`: 1 failed\n\n"
        "[job](https://x/jobs/1) · [bad](javascript:alert(1))\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n<img src=x onerror=alert(1)>\n\n"
        "<details><summary>Earlier runs</summary>\n\n- #1\n\n</details>\n"
    )
    assert "ondemand:add:cpu" not in html
    assert "<h3>❌ <code>add</code> on <code>cpu</code>: 1 failed</h3>" in html
    assert '<a rel="noopener noreferrer nofollow" href="https://x/jobs/1">job</a>' in html
    assert "javascript:" not in html.replace("[bad](javascript:alert(1))", "")  # no such link
    assert 'href="javascript' not in html
    assert "<td>1</td>" in html and "<img" not in html and "&lt;img src=x" in html
    assert "<details><summary>Earlier runs</summary>" in html and "</details>" in html


def test_timeline_while_running_and_when_finished() -> None:
    log = b"[ondemand] setup\n[ondemand] step accuracy: python -m pytest (timeout 60s)\n.."
    steps = timeline(["accuracy", "benchmark"], "running", None, log)
    assert [(s.name, s.state) for s in steps] == [
        ("checkout", "succeeded"),
        ("environment", "succeeded"),
        ("accuracy", "running"),
        ("benchmark", "pending"),
    ]
    ended = log + b"\n[ondemand] step accuracy: exit 0 in 3.0s\n"
    assert [s.state for s in timeline(["accuracy", "benchmark"], "running", None, ended)] == [
        "succeeded", "succeeded", "succeeded", "pending",
    ]  # fmt: skip
    streamed = timeline(["accuracy", "benchmark"], "running", None, b"", current="benchmark")
    assert [s.state for s in streamed][-2:] == ["succeeded", "running"]
    done = timeline(["accuracy"], "failed", result("a" * 40), b"")
    assert [(s.name, s.state, s.duration) for s in done][2] == ("accuracy", "failed", "12.5s")


def test_job_page_report_log_and_privacy(db_url: str) -> None:
    settings = service_settings(db_url, process_workers=False)
    with live_service(settings) as live:
        runner = live.register("runner-one", ["cpu"])
        job, _ = live.service.jobs.create_job(new_job())
        log = b"[ondemand] step accuracy: python -m pytest (timeout 60s)\n" + HOSTILE.encode()
        run_job(live, runner, job.id, log)

        running = httpx.get(f"{live.url}/jobs/{job.id}")
        assert running.status_code == 200
        page = running.text
        assert '<li class="running" data-step="accuracy">accuracy · running</li>' in page
        assert '<script src="/static/live.js"></script>' in page  # it follows the job
        assert "<script>alert" not in page and "&lt;script&gt;alert(" in page  # the log tail
        assert 'href="http://ondemand.test/x/kernels' not in page
        assert 'href="https://github.com/octo/kernels/pull/1"' in page
        assert f'href="https://github.com/octo/kernels/commit/{"a" * 40}"' in page
        live_json = httpx.get(f"{live.url}/jobs/{job.id}/live").json()
        assert live_json["status"] == "running" and live_json["active"] is True
        assert live_json["runner"] == "runner-one" and "alert" in live_json["log"]
        assert [s["state"] for s in live_json["timeline"]][:3] == [
            "succeeded", "succeeded", "running",
        ]  # fmt: skip
        streamed = Progress(
            step="accuracy", tests_done=2, tests_total=3, failed=1, failures=[f"t::{HOSTILE}"]
        )
        assert live.service.jobs.progress(runner[0], job.id, streamed)
        live_json = httpx.get(f"{live.url}/jobs/{job.id}/live").json()
        assert live_json["progress"] == f"accuracy: 2 of 3 tests · 1 failed (t::{HOSTILE})"
        page = httpx.get(f"{live.url}/jobs/{job.id}").text
        assert "accuracy: 2 of 3 tests · 1 failed (t::&lt;script&gt;" in page

        finish_job(live, runner, job.id, result("a" * 40))
        page = httpx.get(f"{live.url}/jobs/{job.id}").text
        report = page.split('<div class="report" id="report">', 1)[1].split("</div>", 1)[0]
        assert "<h3>" in report and "<table>" in report and "<pre" not in report.split("<h4")[0]
        assert "ondemand:add:cpu" not in page and "###" not in report and "**" not in report
        assert "<script>alert" not in page and "<img src=x" not in page
        assert "&lt;script&gt;" in report  # the failure's hostile message, as text
        assert 'class="failed" data-step="accuracy">accuracy · 12.5s' in page
        assert "/static/live.js" not in page  # nothing left to follow
        css = httpx.get(f"{live.url}/static/ondemand.css")
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
        assert httpx.get(f"{live.url}/static/../pages.py").status_code == 404

        secret, _ = live.service.jobs.create_job(new_job(repo="octo/secret", private=True))
        key = live.service.links.key(secret.id)
        for path in ("", "/live", "/log"):
            assert httpx.get(f"{live.url}/jobs/{secret.id}{path}").status_code == 404
            wrong = httpx.get(f"{live.url}/jobs/{secret.id}{path}", params={"key": "0" * 32})
            assert wrong.status_code == 404
            assert httpx.get(f"{live.url}/jobs/{secret.id}{path}", params={"key": key}).is_success
        keyed = httpx.get(f"{live.url}/jobs/{secret.id}", params={"key": key}).text
        assert f'data-live="/jobs/{secret.id}/live?key={key}"' in keyed
        assert "octo/secret" not in httpx.get(f"{live.url}/").text


def test_dashboard_queue_runners_history_and_charts(db_url: str) -> None:
    settings = service_settings(db_url, process_workers=False)
    with live_service(settings) as live:
        runner = live.register("runner-one", ["cpu"])
        first, _ = live.service.jobs.create_job(new_job(sha="1" * 40))
        run_job(live, runner, first.id)
        finish_job(live, runner, first.id, result("1" * 40, (2.0, 2.0), failed=False))
        second, _ = live.service.jobs.create_job(new_job(sha="2" * 40))
        run_job(live, runner, second.id)
        finish_job(live, runner, second.id, result("2" * 40, (0.5, 0.5)))
        interp, _ = live.service.jobs.create_job(new_job(sha="3" * 40))
        run_job(live, runner, interp.id)
        finish_job(live, runner, interp.id, result("3" * 40, (9.0,), performance=False))
        running, _ = live.service.jobs.create_job(new_job(op="mul", sha="4" * 40))
        run_job(live, runner, running.id)
        queued = [
            live.service.jobs.create_job(new_job(op=op, sha="5" * 40, pr=2))[0]
            for op in ("add", "mul")
        ]
        live.service.jobs.create_job(new_job(repo="octo/secret", sha="6" * 40, private=True))
        other, _ = live.service.jobs.create_job(new_job(repo="octo/other", backend="nvidia"))

        page = httpx.get(f"{live.url}/").text
        assert '<meta http-equiv="refresh" content="5">' in page  # jobs are queued
        cpu = page.split('data-backend="cpu"', 1)[1].split('<div class="card queue"', 1)[0]
        assert "3 queued · 1 runner online" in cpu
        assert re.search(rf"<td>1</td>\s*<td><a href=\"/jobs/{queued[0].id}\">", cpu)
        assert re.search(rf"<td>2</td>\s*<td><a href=\"/jobs/{queued[1].id}\">", cpu)
        assert "a private repository's job" in cpu and "octo/secret" not in page
        nvidia = page.split('data-backend="nvidia"', 1)[1]
        assert f'href="/jobs/{other.id}"' in nvidia.split("</div>", 1)[0]
        runners = page.split('id="runners"', 1)[1].split("</table>", 1)[0]
        assert "runner-one" in runners and f'<a href="/jobs/{running.id}">' in runners
        assert "online" in runners

        chart = page.split('data-target="add:cpu"', 1)[1].split("</svg>", 1)[0]
        assert "2 runs" in chart and chart.count("<circle") == 2  # the interpreter run is out
        assert "job #" + str(first.id) in chart and "2.000x" in chart and "0.500x" in chart
        history = page.split('id="history"', 1)[1]
        assert "2.00x" in history and "0.50x" in history

        mine = httpx.get(f"{live.url}/", params={"op": "mul", "backend": "cpu"}).text
        rows = mine.split('id="history"', 1)[1]
        assert f'href="/jobs/{running.id}"' in rows and f'href="/jobs/{queued[1].id}"' in rows
        assert f'href="/jobs/{first.id}"' not in rows
        failed = httpx.get(f"{live.url}/", params={"state": "failed"}).text
        rows = failed.split('id="history"', 1)[1]
        assert f'href="/jobs/{second.id}"' in rows and f'href="/jobs/{first.id}"' not in rows
        by_repo = httpx.get(f"{live.url}/", params={"repo": "octo/other"}).text
        rows = by_repo.split('id="history"', 1)[1]
        assert f'href="/jobs/{other.id}"' in rows and f'href="/jobs/{first.id}"' not in rows
