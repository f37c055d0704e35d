"""Live progress in the one comment: a runner (played over HTTP) streams its progress to the
service, which keeps the latest on the job and shows it in the PR comment and status of the
sandbox, paced (one edit per interval however often progress comes, none when nothing
changed), and the verdict at once, even with a paced edit waiting. On SQLite and PostgreSQL."""

from __future__ import annotations

import math
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx

from service.db.models import Job
from service.links import Links
from service.publish.job_views import JobViews
from tests.service.helpers import new_job, open_queue
from tests.service.test_flow import BOT, REPO, Flow, auth, make_flow, seed_result
from tests.service.test_report import T0
from workflows.models import JobStatus, Progress

INTERVAL_S = 3.0  # GitHub's pace is 20 s; compressed here


def _progress(**fields: Any) -> dict[str, Any]:
    return Progress(**fields).model_dump(mode="json")


def _comment(flow: Flow) -> dict[str, Any]:
    return flow.bot_comments()[0]


def test_progress_reaches_the_comment_paced_then_the_verdict_at_once(
    tmp_path: Path, db_url: str
) -> None:
    with make_flow(tmp_path, db_url=db_url) as flow:
        flow.svc.service.notices.progress_interval = timedelta(seconds=INTERVAL_S)
        flow.comment("/test add:cpu")
        flow.admin.wait_for_comment(REPO, flow.pr, user=BOT, contains="ondemand:add:cpu")
        _, token = flow.svc.register("cpu-1", ["cpu"])
        api = f"{flow.svc.url}/api/v1/jobs"
        spec = httpx.post(
            f"{api}/claim", json={"wait_s": 5}, headers=auth(token), timeout=30
        ).json()
        job_id = spec["id"]
        flow.wait_until(lambda: "running on cpu-1" in _comment(flow)["body"])
        flow.wait_until(flow.quiet)

        # A runner that does not hold the job is refused; a malformed body is 422.
        _, other = flow.svc.register("cpu-2", ["cpu"])
        sent = httpx.post(f"{api}/{job_id}/progress", json=_progress(), headers=auth(other))
        assert sent.status_code == 404
        bad = httpx.post(f"{api}/{job_id}/progress", json={"tests_done": -1}, headers=auth(token))
        assert bad.status_code == 422

        first = _progress(
            step="accuracy",
            tests_done=12,
            tests_total=411,
            failed=1,
            failures=["tests/test_add.py::test_add[float16]"],
        )
        started = time.monotonic()
        assert (
            httpx.post(f"{api}/{job_id}/progress", json=first, headers=auth(token)).status_code
            == 204
        )
        body = flow.wait_until(
            lambda: "12/411 tests" in _comment(flow)["body"] and _comment(flow)["body"],
            timeout=INTERVAL_S + 10,
        )
        assert "`tests/test_add.py::test_add[float16]`" in body
        assert "1 failed so far" in body and "running for" in body
        flow.wait_until(
            lambda: any(
                "12/411 tests" in s["description"] for s in flow.admin.statuses(REPO, flow.head)
            )
        )
        flow.wait_until(flow.quiet)
        edits = len(_comment(flow)["history"])

        # The same progress again changes nothing; a burst of new progress is one paced edit.
        again = httpx.post(f"{api}/{job_id}/progress", json=first, headers=auth(token))
        assert again.status_code == 204
        burst_started = time.monotonic()
        for done in range(13, 23):
            update = _progress(step="accuracy", tests_done=done, tests_total=411, failed=1)
            httpx.post(f"{api}/{job_id}/progress", json=update, headers=auth(token))
        burst_s = time.monotonic() - burst_started
        flow.wait_until(lambda: "22/411 tests" in _comment(flow)["body"], timeout=INTERVAL_S + 10)
        shown = time.monotonic()
        # No edit before the interval after the last one; ten updates, one edit per interval.
        assert shown - started >= INTERVAL_S * 0.9
        flow.wait_until(flow.quiet)
        # A slot may fall inside the burst (an edit with part of it), then one more follows.
        assert len(_comment(flow)["history"]) - edits <= 1 + math.ceil(burst_s / INTERVAL_S)

        # The verdict goes out at once, pulling in a paced edit that was waiting.
        late = _progress(step="accuracy", tests_done=400, tests_total=411, failed=1)
        httpx.post(f"{api}/{job_id}/progress", json=late, headers=auth(token))
        result = seed_result(flow.head).model_dump(mode="json")
        completed = time.monotonic()
        httpx.post(f"{api}/{job_id}/complete", json=result, headers=auth(token))
        flow.wait_until(lambda: "69 passed" in _comment(flow)["body"], timeout=INTERVAL_S)
        assert time.monotonic() - completed < INTERVAL_S
        final = _comment(flow)["body"]
        assert "/411 tests" not in final and "so far" not in final
        # Progress after the verdict changes nothing: the job is no longer running.
        after = httpx.post(f"{api}/{job_id}/progress", json=late, headers=auth(token))
        assert after.status_code == 204
        flow.wait_until(flow.quiet)
        assert "/411 tests" not in _comment(flow)["body"]


def test_the_estimate_is_the_median_of_this_operators_past_runs(db_url: str) -> None:
    with open_queue(db_url) as q:
        views = JobViews(Links("http://ondemand.test", b"k"), q.runners, {})
        runner_id, _ = q.runners.register("r", ["cpu"], [], 1, "test")
        spans = {"add": [10, 30, 20, 400], "mul": [5]}
        for op, seconds in spans.items():
            for i, span in enumerate(seconds):
                job, _ = q.jobs.create_job(new_job(op, "cpu", sha=f"{op}{i}".ljust(40, "0")))
                status = JobStatus.succeeded if span != 400 else JobStatus.errored
                with q.db.writes() as session, session.begin():
                    row = session.get(Job, job.id)
                    assert row is not None
                    row.status = status
                    row.started_at = T0
                    row.finished_at = T0 + timedelta(seconds=span)
        running, _ = q.jobs.create_job(new_job("add", "cpu", sha="f" * 40))
        assert q.jobs.claim(runner_id, ["cpu"]) is not None
        with q.db.reads() as session:
            row = session.get(Job, running.id)
            assert row is not None
            view = views.view(session, row)
        # add's verdicts took 10, 20 and 30 s (an errored run says nothing of its length).
        assert view.estimate_s == 20.0 and view.now is not None and view.progress is None
