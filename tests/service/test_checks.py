"""As a GitHub App the service reports each (operator, backend) as a check run on the sandbox:
queued, in progress with the live progress, completed with the report (the headline as the
summary, the whole report with its table as the text); a cancel is `cancelled` and a
supersede `neutral`, never a red failure; the Re-run button (`check_run` `rerequested`)
runs the job again on the same commit."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select

from service.db.models import Delivery, Job, OutboxItem
from tests.service.test_flow import REPO, Flow, auth, make_flow, seed_result
from tests.web.test_metrics import scrape
from workflows.models import JobStatus, Progress


def _runs(flow: Flow, sha: str, **query: str) -> list[dict[str, Any]]:
    url = f"{flow.admin.base_url}/repos/{REPO}/commits/{sha}/check-runs"
    return list(httpx.get(url, params=query).json()["check_runs"])


def _run(flow: Flow, name: str, sha: str | None = None) -> dict[str, Any] | None:
    found = [r for r in _runs(flow, sha or flow.head) if r["name"] == name]
    return found[0] if found else None


def test_check_runs_as_an_app(tmp_path: Path) -> None:
    with make_flow(tmp_path, app=True) as flow:
        flow.svc.service.notices.progress_interval = timedelta(seconds=0.5)
        flow.comment("/test add,mul:cpu")
        flow.wait_until(lambda: _run(flow, "ondemand/add:cpu") and _run(flow, "ondemand/mul:cpu"))
        add = _run(flow, "ondemand/add:cpu")
        assert add is not None and add["status"] == "queued" and add["conclusion"] is None
        jobs = {j.op: j for j in flow.jobs()}
        assert add["external_id"] == str(jobs["add"].id)
        assert add["details_url"] == f"http://ondemand.test/jobs/{jobs['add'].id}"
        assert add["app"]["slug"] == "ondemand"
        assert flow.admin.statuses(REPO, flow.head) == []  # checks, not statuses

        # A cancel is grey, not red.
        flow.comment("/test cancel mul")
        flow.wait_until(lambda: (_run(flow, "ondemand/mul:cpu") or {}).get("conclusion"))
        mul = _run(flow, "ondemand/mul:cpu")
        assert mul is not None and mul["conclusion"] == "cancelled"
        assert mul["output"]["title"] == "cancelled by @alice"

        # Running: in progress, the progress in the output.
        _, token = flow.svc.register("cpu-1", ["cpu"])
        api = f"{flow.svc.url}/api/v1/jobs"
        spec = _claim_and_report(flow, token, "add")
        flow.wait_until(
            lambda: (
                "12/411 tests"
                in ((_run(flow, "ondemand/add:cpu") or {}).get("output") or {}).get("summary", "")
            ),
        )
        assert _run(flow, "ondemand/add:cpu")["status"] == "in_progress"  # type: ignore[index]

        # Completed: the report is the output.
        result = seed_result(flow.head).model_dump(mode="json")
        httpx.post(f"{api}/{spec['id']}/complete", json=result, headers=auth(token))
        flow.wait_until(lambda: (_run(flow, "ondemand/add:cpu") or {}).get("conclusion"))
        done = _run(flow, "ondemand/add:cpu")
        assert done is not None and done["conclusion"] == "success"
        assert done["id"] == add["id"]  # the same run, updated
        output = done["output"]
        assert output["title"].startswith("69 passed, 3 skipped · geomean 1.95x")
        assert output["summary"].startswith("### ✅ `add` on `cpu`")
        assert "| dtype | Size | Torch Latency (ms)" in output["text"]
        assert "<!-- ondemand" not in output["text"]
        flow.wait_until(flow.quiet)

        # Re-run: the same job again on the same commit, as a new check run of the same name.
        alice = flow.admin.create_token("alice")
        rerun = f"{flow.admin.base_url}/repos/{REPO}/check-runs/{done['id']}/rerequest"
        assert httpx.post(rerun, headers={"Authorization": f"token {alice}"}).status_code == 201
        flow.wait_until(lambda: len(flow.jobs()) == 3)
        again = flow.jobs()[-1]
        assert (again.op, again.backend, again.sha) == ("add", "cpu", flow.head)
        assert again.requested_by == "alice" and again.status == JobStatus.queued
        flow.wait_until(lambda: (_run(flow, "ondemand/add:cpu") or {}).get("status") == "queued")
        job_runs = [r for r in _runs(flow, flow.head, filter="all") if r["name"] != "ondemand"]
        assert len(job_runs) == 3  # the head's one aggregate check aside

        # A push supersedes the queued re-run: neutral.
        flow.admin.push(REPO, flow.pr, flow.next_head)
        flow.wait_until(lambda: (_run(flow, "ondemand/add:cpu") or {}).get("conclusion"))
        superseded = _run(flow, "ondemand/add:cpu")
        assert superseded is not None and superseded["conclusion"] == "neutral"
        assert superseded["output"]["title"] == f"superseded by {flow.next_head[:7]}"
        # The same press processed again (a crash before its delivery was marked done), after
        # the re-run ended (superseded): it runs nothing more.
        with flow.svc.service.db.reads() as session:
            press = session.scalars(select(Delivery).where(Delivery.event == "check_run")).one()
        outcome = flow.svc.service.handler.handle(
            press.delivery_id, "check_run", press.payload or {}, press.received_at
        )
        assert (
            outcome == f"re-run of job {done['external_id']}: job {again.id} already stands for it"
        )
        assert len(flow.jobs()) == 3


def test_a_forged_marker_is_never_taken_for_the_apps_own_comment(tmp_path: Path) -> None:
    """Creating a result comment failed once, so the outbox looks for one it may have posted
    before trying again. As an App it must find only the App's own: an outsider's comment that
    starts with the hidden marker is left as it was, and the result gets a comment of the
    bot's (taking the outsider's, the bot could never edit it: 403, and the result was lost)."""
    with make_flow(tmp_path, app=True) as flow:
        forged = flow.comment(
            "<!-- ondemand:add:cpu -->\n### ✅ `add` on `cpu`: all good, trust me", user="mallory"
        )
        flow.admin.inject_fault(
            502, 1, path_prefix=f"/repos/{REPO}/issues/{flow.pr}/comments", method="POST"
        )
        flow.comment("/test add:cpu")
        flow.wait_until(lambda: flow.jobs() and flow.quiet(), timeout=30)
        comments = flow.admin.comments(REPO, flow.pr)
        results = [c for c in comments if c["body"].startswith("<!-- ondemand:add:cpu -->")]
        assert [c["user"] for c in results] == ["mallory", "ondemand[bot]"]
        assert results[0]["body"] == forged["body"] and len(results[0]["history"]) == 1
        assert "⏳ `add` on `cpu`" in results[1]["body"]


def test_an_update_that_changes_nothing_costs_no_call(tmp_path: Path) -> None:
    """A job's comment and check run are rendered when sent; when they would read as they
    already do (a queue move that moved nothing of theirs, a state re-announced), the outbox
    sends nothing: each edit is one call of the installation's hourly budget."""
    with make_flow(tmp_path, app=True) as flow:
        flow.comment("/test add:cpu")
        flow.wait_until(lambda: _run(flow, "ondemand/add:cpu"))
        flow.wait_until(flow.quiet)

        def writes() -> list[tuple[str, str]]:
            calls = flow.admin.state()["api_calls"]
            return [
                (c["method"], c["path"])
                for c in calls
                if c["method"] in ("POST", "PATCH")
                and ("/issues/comments/" in c["path"] or "/check-runs" in c["path"])
                and not c["path"].endswith("/reactions")
            ]

        before = writes()
        service = flow.svc.service
        (job,) = flow.jobs()
        for _ in range(3):  # as a queue move and a re-announced state would
            with service.db.writes() as session, session.begin():
                row = session.get(Job, job.id)
                assert row is not None
                service.notices.job_changed(session, row)
            service.outbox.kick()
            flow.wait_until(flow.quiet)
        assert writes() == before  # nothing sent again
        with service.db.reads() as session:
            outcomes = session.scalars(
                select(OutboxItem.outcome).where(OutboxItem.kind.in_(("comment", "check")))
            ).all()
        assert sum("unchanged: not sent" in (o or "") for o in outcomes) == 6

        # What does change is sent: the job cancelled edits the comment and the check run once.
        flow.comment("/test cancel add")
        flow.wait_until(lambda: (_run(flow, "ondemand/add:cpu") or {}).get("conclusion"))
        flow.wait_until(flow.quiet)
        head = _run(flow, "ondemand")
        assert head is not None  # the head's aggregate (tests/service/test_head_check.py)
        sent = [w for w in writes()[len(before) :] if not w[1].endswith(f"/{head['id']}")]
        assert sorted(m for m, _ in sent) == ["PATCH", "PATCH"], sent


def test_a_low_budget_leaves_out_the_steps_on_the_way_but_answers_and_verdicts_go_out(
    tmp_path: Path,
) -> None:
    """Below the reserve of the installation's hourly budget (GitHub states what is left in
    every answer), the outbox leaves out 👀 and the edits that only show a job on its way
    (running, progress); a new command's first answer, its check run and the verdict still
    go out. With the budget whole again, edits on the way go out as before."""
    with make_flow(tmp_path, app=True, github_budget_reserve=0.5) as flow:
        flow.svc.service.notices.progress_interval = timedelta(seconds=0.2)
        first = flow.comment("/test add:cpu")
        flow.admin.wait("reaction", comment_id=first["id"], content="eyes")
        flow.wait_until(lambda: _run(flow, "ondemand/add:cpu"))
        flow.wait_until(flow.quiet)

        # A limit that leaves the bot a few calls (not enforced: only stated), which the
        # service learns from GitHub's next answer to it.
        github = flow.svc.service.outbox.github
        assert github is not None
        calls = flow.admin.state()["api_calls"]
        flow.admin.set_rate_limit(sum(c["login"] == "ondemand[bot]" for c in calls) + 4, False)
        github.find_comment(REPO, flow.pr, "<!-- no such marker -->")
        budget = github.budget(REPO)
        assert budget is not None and budget.low(0.5) and budget.remaining <= 3
        owner = (("installation", REPO.split("/")[0]),)
        metrics = scrape(flow.svc.url)  # what an operator sees
        assert metrics[("ondemand_github_calls_left", owner)] == budget.remaining
        assert metrics[("ondemand_github_calls_limit", owner)] == budget.limit
        second = flow.comment("/test mul:cpu")
        flow.wait_until(lambda: _run(flow, "ondemand/mul:cpu"))  # its check run: created
        flow.wait_until(lambda: _bot_comment(flow, "mul"))
        flow.wait_until(flow.quiet)
        reactions = [r["content"] for r in _comment(flow, second["id"])["reactions"]]
        assert reactions == []  # left out: the comment answers the command

        # The add job runs and reports progress: neither its comment nor its check run moves.
        add_comment = _text(flow, "add")
        _, token = flow.svc.register("cpu-1", ["cpu"])
        api = f"{flow.svc.url}/api/v1/jobs"
        spec = _claim_and_report(flow, token, "add")
        flow.wait_until(lambda: _outcomes(flow, "an update on the way left out"))
        flow.wait_until(lambda: _outcomes(flow, "an edit on the way left out"))
        flow.wait_until(flow.quiet)
        assert _text(flow, "add") == add_comment
        run = _run(flow, "ondemand/add:cpu")
        assert run is not None and run["status"] == "queued"

        # The verdict goes out, on the comment and the check run.
        result = seed_result(flow.head).model_dump(mode="json")
        httpx.post(f"{api}/{spec['id']}/complete", json=result, headers=auth(token))
        flow.wait_until(lambda: (_run(flow, "ondemand/add:cpu") or {}).get("conclusion"))
        flow.wait_until(lambda: "69 passed" in _text(flow, "add"))

        # The budget whole again: the mul job's edits on the way go out.
        flow.admin.set_rate_limit(100_000, enforced=False)
        github.find_comment(REPO, flow.pr, "<!-- no such marker -->")
        _claim_and_report(flow, token, "mul")
        flow.wait_until(lambda: "12/411 tests" in _text(flow, "mul"))
        flow.wait_until(lambda: (_run(flow, "ondemand/mul:cpu") or {})["status"] == "in_progress")


def _claim_and_report(flow: Flow, token: str, op: str) -> dict[str, Any]:
    """A runner claims the next job, which must be `op`'s, and reports 12 of 411 tests done."""
    api = f"{flow.svc.url}/api/v1/jobs"
    spec: dict[str, Any] = httpx.post(
        f"{api}/claim", json={"wait_s": 5}, headers=auth(token), timeout=30
    ).json()
    assert spec["op"] == op
    progress = Progress(step="accuracy", tests_done=12, tests_total=411).model_dump()
    httpx.post(f"{api}/{spec['id']}/progress", json=progress, headers=auth(token))
    return spec


def _bot_comment(flow: Flow, op: str) -> dict[str, Any] | None:
    """The result comment of `op` on cpu (None before there is one)."""
    comments = flow.admin.comments(REPO, flow.pr)
    found = [c for c in comments if c["body"].startswith(f"<!-- ondemand:{op}:cpu")]
    return found[0] if found else None


def _text(flow: Flow, op: str) -> str:
    found = _bot_comment(flow, op)
    return found["body"] if found else ""


def _comment(flow: Flow, comment_id: int) -> dict[str, Any]:
    (found,) = [c for c in flow.admin.comments(REPO, flow.pr) if c["id"] == comment_id]
    return found


def _outcomes(flow: Flow, words: str) -> list[str]:
    with flow.svc.service.db.reads() as session:
        outcomes = session.scalars(select(OutboxItem.outcome)).all()
    return [o for o in outcomes if o and words in o]
