"""The job page and the dashboard over HTTP, on SQLite and PostgreSQL: the report rendered from
its Markdown with untrusted text escaped and the marker gone, the step timeline and log tail,
the live state as JSON, private jobs behind their key and never listed, the queue per backend,
runners and their jobs, the filterable history and the speedup charts."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import httpx

from service.db.models import Job
from service.web.job_page_views import timeline
from service.web.report_html import report_html
from service.web.speedup_chart import ChartPoint, charts, job_speedup, speedup_svg
from tests.service.helpers import live_service, service_settings
from tests.web.support import HOSTILE, finish_job, new_job, result, run_job
from workflows.models import JobResult, Progress, Rounds

SVG = "{http://www.w3.org/2000/svg}"


def test_report_html_renders_markdown_and_nothing_else() -> None:
    html = report_html(
        "<!-- ondemand:add:cpu -->\n### ❌ `add` on `cpu`: 1 failed\n\n"
        "[job](https://x/jobs/1) · [bad](javascript:alert(1))\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n<img src=x onerror=alert(1)>\n\n"
        "<details><summary>Earlier runs</summary>\n\n- #1\n\n</details>\n"
    )
    assert "ondemand:add:cpu" not in html
    assert "<h3>❌ <code>add</code> on <code>cpu</code>: 1 failed</h3>" in html
    assert '<a href="https://x/jobs/1" rel="noopener noreferrer nofollow">job</a>' in html
    assert "javascript:" not in html.replace("[bad](javascript:alert(1))", "")  # no such link
    assert 'href="javascript' not in html
    assert "<td>1</td>" in html and '<img src="x">' in html and "onerror" not in html
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

        assert httpx.get(f"{live.url}/jobs/{job.id}/result.json").json()["result"] is None
        done = result("a" * 40)
        finish_job(live, runner, job.id, done)
        data = httpx.get(f"{live.url}/jobs/{job.id}/result.json").json()
        assert (data["id"], data["repo"], data["op"], data["status"]) == (
            job.id, "octo/kernels", "add", "failed",
        )  # fmt: skip
        assert data["finished_at"].endswith("+00:00") and data["attempt"] == 1
        assert JobResult.model_validate(data["result"]) == done  # what the runner reported
        page = httpx.get(f"{live.url}/jobs/{job.id}").text
        assert f'href="/jobs/{job.id}/result.json">result as JSON</a>' in page
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
        for path in ("", "/live", "/log", "/result.json"):
            assert httpx.get(f"{live.url}/jobs/{secret.id}{path}").status_code == 404
            wrong = httpx.get(f"{live.url}/jobs/{secret.id}{path}", params={"key": "0" * 32})
            assert wrong.status_code == 404
            assert httpx.get(f"{live.url}/jobs/{secret.id}{path}", params={"key": key}).is_success
        keyed = httpx.get(f"{live.url}/jobs/{secret.id}", params={"key": key}).text
        assert f'data-live="/jobs/{secret.id}/live?key={key}"' in keyed
        assert f'href="/jobs/{secret.id}/result.json?key={key}"' in keyed
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
        assert "job #" + str(first.id) in chart and "2.00x" in chart and "0.50x" in chart
        assert "whisker" not in chart and "default branch" not in chart  # no rounds: as before
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


def _svg(svg: str) -> ET.Element:
    """The chart parsed as XML: it must be well-formed, whatever its data said."""
    return ET.fromstring(svg)


def _groups(root: ET.Element, kind: str) -> list[ET.Element]:
    return [g for g in root.iter(f"{SVG}g") if g.get("class") == f"point {kind}"]


def _line(group: ET.Element, cls: str) -> ET.Element | None:
    return next((e for e in group.iter(f"{SVG}line") if e.get("class") == cls), None)


def test_speedup_svg_draws_each_interval_as_a_whisker() -> None:
    points = [
        ChartPoint(11, "a" * 40, 1.1),  # an old job: no rounds
        ChartPoint(12, "abc1234" + "0" * 33, 1.61, 1.58, 1.64, 8),
        ChartPoint(13, "c" * 40, 1.2, 0.2, 3.0, 20),  # bounds far outside every value
        ChartPoint(14, "d" * 40, 0.9, rounds=3),  # rounds too few to bound it
    ]
    svg = speedup_svg(points, height=160)
    root = _svg(svg)
    groups = _groups(root, "pr")
    assert [g.get("data-job") for g in groups] == ["11", "12", "13", "14"]
    titles = [g.findtext(f"{SVG}title") for g in groups]
    assert titles == [
        "job #11 · aaaaaaa · 1.10x",
        "job #12 · abc1234 · 1.61x (95 % 1.58–1.64x, 8 rounds)",
        "job #13 · ccccccc · 1.20x (95 % 0.20–3.00x, 20 rounds)",
        "job #14 · ddddddd · 0.90x (3 rounds, too few for an interval)",
    ]
    assert _line(groups[0], "whisker") is None and _line(groups[3], "whisker") is None
    assert groups[0].find(f"{SVG}line") is None and groups[3].find(f"{SVG}line") is None
    for group in groups[1:3]:
        whisker, low, high = (_line(group, c) for c in ("whisker", "cap low", "cap high"))
        circle = group.find(f"{SVG}circle")
        assert whisker is not None and low is not None and high is not None
        assert circle is not None
        y_low, y_high, cy = (
            float(whisker.get("y1")),
            float(whisker.get("y2")),
            float(circle.get("cy")),
        )
        assert y_low > cy > y_high  # the low bound lower on screen (a larger y), the point inside
        assert float(low.get("y1")) == y_low and float(high.get("y1")) == y_high
        assert whisker.get("x1") == whisker.get("x2") == circle.get("cx")
        assert float(low.get("x1")) < float(circle.get("cx")) < float(low.get("x2"))
    # the y-range holds the bounds, not only the values: 3.0 and 0.2 stay inside the plot
    wide = _line(groups[2], "whisker")
    assert wide is not None
    assert float(wide.get("y2")) > 0 and float(wide.get("y1")) < 160 - 22
    labels = [t.text for t in root.iter(f"{SVG}text")]
    assert "3.8x" in labels and "0.16x" in labels  # 3.0 * 1.25 and 0.2 / 1.25
    assert "legend" not in svg and "base" not in svg  # one series: no legend


def test_speedup_svg_without_rounds_is_as_before() -> None:
    root = _svg(speedup_svg([ChartPoint(1, "1" * 40, 2.0), ChartPoint(2, "2" * 40, 0.5)]))
    assert not [e for e in root.iter(f"{SVG}line") if e.get("class") != "one"]
    assert [c.get("class") for c in root.iter(f"{SVG}circle")] == ["up", "down"]


def _job(
    job_id: int,
    sha: str,
    base_sha: str | None = None,
    rounds: Rounds | None = None,
    before: Rounds | None = None,
    op: str = "add",
    performance: bool = True,
) -> Job:
    """A finished job row as the queue stores it (not in a database: `charts` reads rows)."""
    done = result(sha, (1.5, 1.5), performance, failed=False, rounds=rounds, before=before)
    return Job(
        id=job_id,
        repo="octo/kernels",
        op=op,
        backend="cpu",
        sha=sha,
        base_sha=base_sha,
        status="succeeded",
        result=done.model_dump(mode="json"),
    )


def _rounds(median: float, low: float | None = None, high: float | None = None) -> Rounds:
    return Rounds(rounds=8, median=median, low=low, high=high)


def test_charts_draw_the_default_branch_once_per_base_commit() -> None:
    base_a, base_b = "a" * 40, "b" * 40
    jobs = [
        _job(1, "1" * 40, base_a, _rounds(1.6, 1.58, 1.64), _rounds(1.50, 1.46, 1.54)),
        _job(2, "2" * 40, base_b, _rounds(1.7, 1.6, 1.8), _rounds(1.40, 1.35, 1.45)),
        _job(3, "3" * 40, base_a, _rounds(1.65, 1.6, 1.7), _rounds(1.45, 1.40, 1.50)),
        _job(4, "4" * 40, "c" * 40),  # an old job (or --no-compare): no rounds at all
        _job(5, "5" * 40, "d" * 40, _rounds(9.0), _rounds(9.0, 8, 10), performance=False),
        _job(6, "6" * 40, None, _rounds(1.6), _rounds(1.3, 1.2, 1.4)),  # no base commit known
        _job(7, "7" * 40, "e" * 40, _rounds(1.5, 1.4, 1.6), _rounds(0.0)),  # not drawable
        _job(8, "8" * 40, base_b, op="mul"),
    ]
    add, mul = charts(jobs)
    assert (add.op, mul.op) == ("add", "mul")
    # the pull requests' points: the rounds' median where there are rounds (not the 1.5 the
    # single measurement said), the interpreter run left out
    assert [(p.job_id, p.speedup) for p in add.points] == [
        (1, 1.6), (2, 1.7), (3, 1.65), (4, 1.5), (6, 1.6), (7, 1.5),
    ]  # fmt: skip
    assert add.points[0] == ChartPoint(1, "1" * 40, 1.6, 1.58, 1.64, 8)
    assert add.points[3] == ChartPoint(4, "4" * 40, 1.5)
    assert job_speedup(jobs[0]) == 1.6 and job_speedup(jobs[3]) == 1.5
    assert job_speedup(jobs[4]) is None
    # the default branch: A measured again by job 3 counts once, as job 3 measured it, after B
    assert add.base == [
        ChartPoint(2, base_b, 1.40, 1.35, 1.45, 8),
        ChartPoint(3, base_a, 1.45, 1.40, 1.50, 8),
    ]
    assert mul.base == [] and "base" not in mul.svg and "legend" not in mul.svg

    root = _svg(add.svg)
    based = _groups(root, "base")
    assert [g.get("data-job") for g in based] == ["2", "3"]
    assert [g.findtext(f"{SVG}title") for g in based] == [
        "default branch · bbbbbbb · 1.40x (95 % 1.35–1.45x, 8 rounds) · job #2",
        "default branch · aaaaaaa · 1.45x (95 % 1.40–1.50x, 8 rounds) · job #3",
    ]
    for group in based:
        whisker = _line(group, "whisker")
        assert whisker is not None and float(whisker.get("y1")) > float(whisker.get("y2"))
        assert group.find(f"{SVG}circle").get("class") == "base"  # hollow, in the stylesheet
    # each base point stands just beside the point of the job that measured it
    pr_x = {g.get("data-job"): float(g.find(f"{SVG}circle").get("cx")) for g in _groups(root, "pr")}
    base_x = [float(g.find(f"{SVG}circle").get("cx")) for g in based]
    assert [b - a for a, b in zip((pr_x["2"], pr_x["3"]), base_x, strict=True)] == [6.0, 6.0]
    line = next(e for e in root.iter(f"{SVG}polyline") if e.get("class") == "line base")
    xs = [float(xy.split(",")[0]) for xy in line.get("points").split()]
    assert xs == sorted(xs) and len(xs) == 2
    legend = next(g for g in root.iter(f"{SVG}g") if g.get("class") == "legend")
    assert "default branch" in "".join(legend.itertext())


def test_charts_escape_what_the_data_says() -> None:
    hostile = "<b>&'\""
    jobs = [
        _job(
            1, hostile + "1" * 34, hostile + "2" * 34, _rounds(1.2, 1.1, 1.3), _rounds(1.1, 1, 1.2)
        )
    ]
    (chart,) = charts(jobs)
    assert "<b>" not in chart.svg and "&lt;b&gt;&amp;" in chart.svg
    root = _svg(chart.svg)  # still well-formed
    (pr,) = _groups(root, "pr")
    (base,) = _groups(root, "base")
    assert pr.findtext(f"{SVG}title").startswith("job #1 · <b>&'\"1 · 1.20x")
    assert base.findtext(f"{SVG}title").startswith("default branch · <b>&'\"2 · 1.10x")
    assert [t.text for t in root.iter(f"{SVG}text")][-2:] == ["<b>&'\"1", "<b>&'\"1 · 1.20x"]
