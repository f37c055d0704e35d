"""As a GitHub App, every tested head carries exactly one `ondemand` check run that stands for
all of its jobs: the one check branch protection and merge queues can require. Pending while
a job waits, failure when a job's own check fails, success when every job passed or when
nothing needed testing."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from report.head_check import HEAD_CHECK, head_verdict, render_head_check
from report.views import JobView
from tests.service.test_changed import BASE, HEAD
from tests.service.test_flow import REPO, Flow, auth, make_flow, seed_result
from workflows.models import JobResult, JobStatus


def _heads(flow: Flow, sha: str) -> list[dict[str, Any]]:
    url = f"{flow.admin.base_url}/repos/{REPO}/commits/{sha}/check-runs"
    runs = httpx.get(url, params={"filter": "all"}).json()["check_runs"]
    return [r for r in runs if r["name"] == HEAD_CHECK]


def _head(flow: Flow, sha: str) -> dict[str, Any]:
    (run,) = _heads(flow, sha)  # exactly one, however many jobs and updates
    return run


def _complete(flow: Flow, token: str, result: JobResult) -> None:
    api = f"{flow.svc.url}/api/v1/jobs"
    spec = httpx.post(f"{api}/claim", json={}, headers=auth(token)).json()
    body = result.model_copy(update={"sha": spec["sha"]}).model_dump(mode="json")
    assert httpx.post(f"{api}/{spec['id']}/complete", json=body, headers=auth(token)).is_success


def test_one_check_per_head_follows_its_jobs(tmp_path: Path) -> None:
    with make_flow(tmp_path, app=True) as flow:
        flow.comment("/test add,mul:cpu")
        flow.wait_until(lambda: _heads(flow, flow.head))
        flow.wait_until(flow.quiet)
        pending = _head(flow, flow.head)
        assert pending["status"] == "in_progress" and pending["conclusion"] is None
        assert pending["output"]["title"] == "2 jobs: 2 queued or running"

        _, token = flow.svc.register("cpu-1", ["cpu"])
        _complete(flow, token, seed_result(flow.head))
        failed = JobResult(status=JobStatus.failed, sha=flow.head)
        _complete(flow, token, failed)
        flow.wait_until(lambda: _head(flow, flow.head)["conclusion"] == "failure")
        red = _head(flow, flow.head)
        assert red["id"] == pending["id"]  # the same run, updated in place
        assert red["output"]["title"] == "2 jobs: 1 failed · 1 passed"
        summary = red["output"]["summary"]
        assert summary.index("❌ `mul` on `cpu`") < summary.index("✅ `add` on `cpu`")

        # /retest runs the failed target again: pending, then green once it passes.
        flow.comment("/retest")
        flow.wait_until(lambda: _head(flow, flow.head)["status"] == "in_progress")
        _complete(flow, token, seed_result(flow.head))
        flow.wait_until(lambda: _head(flow, flow.head)["conclusion"] == "success")
        assert _head(flow, flow.head)["output"]["title"] == "2 jobs: 2 passed"

        # A push: the old head's jobs are done; the new head has no check until a job runs.
        flow.admin.push(REPO, flow.pr, flow.next_head)
        flow.wait_until(flow.quiet)
        assert _heads(flow, flow.next_head) == []


def test_a_head_where_nothing_needed_testing_is_green(tmp_path: Path) -> None:
    with make_flow(tmp_path, app=True, base_files=BASE) as flow:  # the head changes no operator
        flow.comment("/test changed")
        flow.wait_until(lambda: _heads(flow, flow.head) and flow.quiet())
        run = _head(flow, flow.head)
        assert (run["status"], run["conclusion"]) == ("completed", "success")
        assert run["output"]["title"] == "nothing to test: no operator changed"
        assert flow.jobs() == []


def _view(id: int, op: str, status: JobStatus, **more: Any) -> JobView:
    now = datetime(2026, 12, 7, tzinfo=UTC)
    return JobView(
        id=id, repo=REPO, pr_number=1, op=op, backend="cpu", sha="a" * 40, status=status,
        bench=True, compare=True, created_at=now, started_at=None, finished_at=None,
        runner_name=None, queue_position=None, runners_online=1, job_url=f"u/{id}",
        log_url=f"u/{id}/log", result=None, reason=None, **more,
    )  # fmt: skip


def test_the_head_verdict_counts_each_targets_latest_job() -> None:
    ok, fail = JobStatus.succeeded, JobStatus.failed
    # An earlier failure of a target retested since counts no more.
    assert head_verdict([_view(1, "add", fail), _view(2, "add", ok)]).conclusion == "success"
    # A cancel says nothing of the code: not green.
    mixed = head_verdict([_view(1, "add", ok), _view(2, "mul", JobStatus.cancelled)])
    assert (mixed.conclusion, mixed.title) == ("cancelled", "2 jobs: 1 cancelled · 1 passed")
    assert (
        head_verdict(
            [_view(1, "add", JobStatus.errored), _view(2, "mul", JobStatus.timed_out)]
        ).conclusion
        == "failure"
    )
    # Superseded jobs: the pull request moved on.
    moved = head_verdict([_view(1, "add", JobStatus.superseded)])
    assert moved.conclusion == "neutral" and moved.title.startswith("superseded")
    # No job, and why: green; no job and no why: green, saying nothing was asked.
    assert head_verdict([], "no operator changed").title == "nothing to test: no operator changed"
    # Jobs decide over an idle reason.
    assert head_verdict([_view(1, "add", JobStatus.running)], "x").status == "in_progress"


def test_a_merge_group_runs_what_the_settings_say_and_reports_on_its_head(tmp_path: Path) -> None:
    """GitHub's merge queue makes a group's head (the pull request merged onto the base's
    tip) and asks for the required checks there with `merge_group`; a queue waits for
    `ondemand` until it comes."""
    settings = "merge_queue:\n  run: changed\n  backends: [cpu]\n"
    base = {**BASE, ".github/ondemand.yml": settings}
    with make_flow(tmp_path, app=True, base_files=base, head_files=HEAD) as flow:
        group = flow.admin.merge_queue(REPO, flow.pr)
        assert group["head_ref"].endswith(f"/pr-{flow.pr}-{group['base_sha']}")
        flow.wait_until(lambda: flow.jobs() and _heads(flow, group["head_sha"]))
        job = flow.jobs()[0]
        assert (job.op, job.backend, job.sha) == ("pool", "cpu", group["head_sha"])
        assert (job.pr_number, job.base_sha, job.requested_by) == (
            flow.pr,
            group["base_sha"],
            "merge-queue",
        )
        assert _head(flow, group["head_sha"])["status"] == "in_progress"
        # Dequeued before its job ran: the job stops, and the group's check says so.
        flow.admin.destroy_merge_group(REPO, flow.pr, group["head_sha"], "dequeued")
        flow.wait_until(lambda: _head(flow, group["head_sha"])["conclusion"] == "cancelled")
        assert flow.jobs()[0].reason == f"merge group {group['head_sha'][:7]} dequeued"
        # Queued again: a new group, run to its verdict.
        time.sleep(1.05)  # a new second: git makes the group's merge commit anew
        group = flow.admin.merge_queue(REPO, flow.pr)
        flow.wait_until(lambda: len(flow.jobs()) == 2 and _heads(flow, group["head_sha"]))
        _, token = flow.svc.register("cpu-1", ["cpu"])
        _complete(flow, token, seed_result(group["head_sha"]))
        flow.wait_until(lambda: _head(flow, group["head_sha"])["conclusion"] == "success")
        assert _heads(flow, flow.head) == []  # the pull request's own head ran nothing

    # No `merge_queue` in the settings: nothing runs, and the group's check is green at once.
    (tmp_path / "plain").mkdir()
    with make_flow(tmp_path / "plain", app=True, base_files=BASE, head_files=HEAD) as flow:
        group = flow.admin.merge_queue(REPO, flow.pr)
        flow.wait_until(lambda: _heads(flow, group["head_sha"]))
        run = _head(flow, group["head_sha"])
        assert (run["conclusion"], flow.jobs()) == ("success", [])
        assert run["output"]["title"].startswith("nothing to test: the merge queue runs nothing")


def test_a_job_on_its_way_changes_nothing_in_the_heads_check() -> None:
    """Claims and progress are the job's own check's to show: the head's stays as it was
    (an update that would change nothing is not sent, so it costs no call)."""
    queued = render_head_check("a" * 40, [_view(1, "add", JobStatus.queued)], "u")
    running = render_head_check("a" * 40, [_view(1, "add", JobStatus.running)], "u")
    assert queued == running
    done = render_head_check("a" * 40, [_view(1, "add", JobStatus.succeeded)], "u")
    assert done.conclusion == "success" and done.summary != running.summary
