"""The regression gate end to end, the service against the sandbox on both databases: the
repository's `.github/ondemand.yml` is read from the pull request's base (its head's copy is
ignored) and each job keeps its threshold and gate; with `gate: fail` a row slower beyond
noise fails the commit status (as an App, the check run) until a maintainer runs `/test
accept-regression`; a malformed file is answered with its lines and the defaults apply."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.db.models import Job
from tests.service.test_flow import BOT, REPO, Flow, auth, make_flow
from workflows.models import (
    AccuracyResult,
    BenchmarkResult,
    BenchmarkRow,
    Change,
    JobResult,
    JobStatus,
)

CONFIG = ".github/ondemand.yml"
GATE_FAIL = "compare:\n  gate: fail\n"
GATE_INFORM = "compare:\n  gate: inform\n"
SLOWER = Change(rounds=8, ratio=1.4, low=1.35, high=1.45)  # 40 % slower, ±3.6 %
SAME = Change(rounds=8, ratio=1.0, low=0.99, high=1.01)  # an A/A comparison
CONTEXT = "ondemand/add:cpu"
APP_BOT = "ondemand[bot]"  # the App's comments are its bot user's
REPLY = "<!-- ondemand:reply:"  # a reply to a command, not a result comment


@contextmanager
def gated(tmp_path: Path, db_url: str, base: str, *, app: bool = False) -> Iterator[Flow]:
    """The flow with `base` as the base's settings file; the PR's head has one that says
    `gate: inform`, which must never count."""
    with make_flow(
        tmp_path,
        app=app,
        db_url=db_url,
        base_files={CONFIG: base},
        head_files={CONFIG: GATE_INFORM},
    ) as flow:
        yield flow


def bench_result(sha: str, op: str, change: Change) -> JobResult:
    """A succeeded job whose two rows were timed before and after with `change`."""
    rows = [
        BenchmarkRow(
            dtype=dtype,
            size=[1024, 1024],
            reference_ms=0.010,
            kernel_ms=0.005 * change.ratio,
            speedup=2.0 / change.ratio,
            before_kernel_ms=0.005,
            change=change,
        )
        for dtype in ("float16", "float32")
    ]
    return JobResult(
        status=JobStatus.succeeded,
        sha=sha,
        accuracy=AccuracyResult(passed=12),
        benchmark=BenchmarkResult(op=op, rows=rows, performance=True),
    )


class Runner:
    """A runner played over HTTP: claims the next job and completes it."""

    def __init__(self, flow: Flow) -> None:
        self.flow = flow
        self.api = f"{flow.svc.url}/api/v1/jobs"
        _, self.token = flow.svc.register("cpu-1", ["cpu"])

    def run(self, change: Change) -> dict[str, Any]:
        """Claim a job and complete it with `change` on every row; its spec."""
        spec = httpx.post(
            f"{self.api}/claim", json={"wait_s": 5}, headers=auth(self.token), timeout=10
        ).json()
        result = bench_result(spec["sha"], spec["op"], change).model_dump(mode="json")
        done = httpx.post(
            f"{self.api}/{spec['id']}/complete", json=result, headers=auth(self.token)
        )
        assert done.json() == {"status": "succeeded"}
        self.flow.wait_until(self.flow.quiet)
        return dict(spec)


def job(flow: Flow, job_id: int) -> Job:
    return next(j for j in flow.jobs() if j.id == job_id)


def newest_status(flow: Flow, context: str = CONTEXT) -> dict[str, Any]:
    return [s for s in flow.admin.statuses(REPO, flow.head) if s["context"] == context][-1]


def result_comment(flow: Flow, op: str = "add") -> str:
    return next(c["body"] for c in flow.bot_comments() if f"ondemand:{op}:cpu" in c["body"])


def check_run(flow: Flow, name: str = CONTEXT) -> dict[str, Any]:
    url = f"{flow.admin.base_url}/repos/{REPO}/commits/{flow.head}/check-runs"
    (run,) = [r for r in httpx.get(url).json()["check_runs"] if r["name"] == name]
    return dict(run)


def command(flow: Flow, body: str, user: str = "alice", bot: str = BOT) -> str:
    """Post `body` as `user`; once everything is quiet, the bot's replies posted since ("" if
    none)."""
    posted = flow.comment(body, user=user)
    flow.admin.wait("reaction", comment_id=posted["id"], content="eyes")
    flow.wait_until(flow.quiet)
    return "\n".join(
        c["body"]
        for c in flow.admin.comments(REPO, flow.pr)
        if c["user"] == bot and c["id"] > posted["id"] and REPLY in c["body"]
    )


def failed_gate(flow: Flow) -> tuple[Runner, int]:
    """`/test add:cpu` on the gated base, completed 40 % slower: the runner and the job's id."""
    command(flow, "/test add:cpu")
    runner = Runner(flow)
    spec = runner.run(SLOWER)
    return runner, int(spec["id"])


def test_a_regression_fails_the_base_branchs_gate_and_an_a_a_run_passes(
    tmp_path: Path, db_url: str
) -> None:
    with gated(tmp_path, db_url, GATE_FAIL) as flow:
        runner, first = failed_gate(flow)
        stored = job(flow, first)
        assert (stored.gate, stored.threshold) == ("fail", pytest.approx(0.1))  # the base's
        status = newest_status(flow)
        assert status["state"] == "failure"
        assert status["description"].startswith("regression gate failed · 12 passed")
        body = result_comment(flow)
        assert "**Regression gate: failed.**" in body
        assert "`/test accept-regression add`" in body

        # The same target again, measured A/A: nothing slower, so the gate passes.
        command(flow, "/test add:cpu")
        second = int(runner.run(SAME)["id"])
        assert second != first and job(flow, second).gate == "fail"
        status = newest_status(flow)
        assert status["state"] == "success"
        assert "regression gate" not in status["description"]
        assert "no significant change" in status["description"]


def test_accept_regression_needs_write_permission_and_turns_the_status_green(
    tmp_path: Path, db_url: str
) -> None:
    with gated(tmp_path, db_url, GATE_FAIL) as flow:
        _, job_id = failed_gate(flow)
        assert newest_status(flow)["state"] == "failure"
        statuses = len(flow.admin.statuses(REPO, flow.head))

        other = command(flow, "/test accept-regression mul")  # matches no failed gate
        assert "Nothing to accept: no latest job of this pull request matching `mul`" in other
        assert job(flow, job_id).accepted_by is None

        refused = command(flow, "/test accept-regression add", user="mallory")
        assert "@mallory: only people with write permission" in refused
        assert job(flow, job_id).accepted_by is None
        assert len(flow.admin.statuses(REPO, flow.head)) == statuses  # nothing was said again
        assert newest_status(flow)["state"] == "failure"

        accepted = command(flow, "/test accept-regression add")
        assert "@alice accepted the regression of 1 job matching `add`" in accepted
        assert f"/jobs/{job_id}" in accepted
        assert job(flow, job_id).accepted_by == "alice"
        status = newest_status(flow)
        assert status["state"] == "success"
        assert status["description"].startswith("regression accepted by @alice")
        body = result_comment(flow)
        assert "accepted by @alice" in body and "Regression gate: failed" not in body

        nothing = command(flow, "/test accept-regression")  # all accepted already
        assert "Nothing to accept: no latest job of this pull request failed its" in nothing
        assert newest_status(flow)["state"] == "success"


def test_as_an_app_the_check_run_fails_then_turns_neutral_when_accepted(
    tmp_path: Path, db_url: str
) -> None:
    with gated(tmp_path, db_url, GATE_FAIL, app=True) as flow:
        _, job_id = failed_gate(flow)
        assert flow.admin.statuses(REPO, flow.head) == []  # checks, not statuses
        run = check_run(flow)
        assert (run["status"], run["conclusion"]) == ("completed", "failure")
        assert run["output"]["title"].startswith("regression gate failed")

        accepted = command(flow, "/test accept-regression add:cpu", bot=APP_BOT)
        assert "@alice accepted the regression of 1 job matching `add:cpu`" in accepted
        assert job(flow, job_id).accepted_by == "alice"
        run = check_run(flow)
        assert (run["status"], run["conclusion"]) == ("completed", "neutral")
        assert run["output"]["title"].startswith("regression accepted by @alice")


def test_a_malformed_settings_file_is_answered_with_its_line_and_the_defaults_apply(
    tmp_path: Path, db_url: str
) -> None:
    with gated(tmp_path, db_url, "compare:\n  threshold: 150%\n") as flow:
        reply = command(flow, "/test add:cpu")
        assert f"`{CONFIG}` on `main` has a problem, so the defaults apply" in reply
        assert "(threshold 10 %, gate inform)" in reply
        assert "- line 2: " in reply
        (created,) = flow.jobs()
        assert (created.gate, created.threshold) == ("inform", pytest.approx(0.1))
        Runner(flow).run(SLOWER)  # slower, but the default gate only informs
        status = newest_status(flow)
        assert status["state"] == "success"
        assert "regression gate" not in status["description"]


def test_a_per_operator_override_applies_to_that_operator_only(tmp_path: Path, db_url: str) -> None:
    settings = "compare:\n  operators:\n    add:\n      gate: fail\n      threshold: 20%\n"
    with gated(tmp_path, db_url, settings) as flow:
        assert command(flow, "/test add,mul:cpu") == ""  # no problem to tell
        jobs = {j.op: j for j in flow.jobs()}
        assert (jobs["add"].gate, jobs["add"].threshold) == ("fail", pytest.approx(0.2))
        assert (jobs["mul"].gate, jobs["mul"].threshold) == ("inform", pytest.approx(0.1))
        runner = Runner(flow)
        runner.run(SLOWER)
        runner.run(SLOWER)
        assert newest_status(flow, "ondemand/add:cpu")["state"] == "failure"
        assert newest_status(flow, "ondemand/mul:cpu")["state"] == "success"
        assert "beyond ±20 %" in result_comment(flow, "add")
        assert "beyond ±10 %" in result_comment(flow, "mul")
        assert "Regression gate" not in result_comment(flow, "mul")
