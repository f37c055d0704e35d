"""The service against the GitHub sandbox, both under uvicorn on loopback: a comment arrives as a
signed webhook; the service reads permission and the head SHA through PyGithub, queues jobs,
acknowledges (reaction, pending status, "queued" comment), and updates the same comment as a
runner (played here over HTTP) claims and completes the job. Outbox retries through faults."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from sandbox.app import create_app as create_sandbox
from sandbox.client import SandboxAdmin
from service.db.models import Delivery, Job, OutboxItem, ResultComment
from tests.service.helpers import LiveService, live_service, service_settings, sqlite_at_head
from tests.support.git import git
from tests.support.keys import rsa_keypair
from tests.support.live import live_server
from workflows.models import (
    AccuracyResult,
    BenchmarkResult,
    BenchmarkRow,
    JobResult,
    JobStatus,
)

APP_ID = 4242
REPO = "acme/kernels"
SECRET = "new-secret"
BOT = "ondemand-bot"


@dataclass
class Flow:
    admin: SandboxAdmin
    svc: LiveService
    pr: int
    head: str
    next_head: str

    def comment(self, body: str, user: str = "alice") -> dict[str, Any]:
        return self.admin.comment(REPO, self.pr, user, body)

    def bot_comments(self) -> list[dict[str, Any]]:
        return [c for c in self.admin.comments(REPO, self.pr) if c["user"] == BOT]

    def wait_until(self, check: Callable[[], Any], timeout: float = 10.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {check}")
            time.sleep(0.05)

    def jobs(self) -> list[Job]:
        with self.svc.service.db.reads() as session:
            return list(session.scalars(select(Job).order_by(Job.id)))

    def quiet(self) -> bool:
        """Every delivery processed and the outbox drained."""
        with self.svc.service.db.reads() as s:
            busy = s.scalars(select(Delivery.id).where(Delivery.done_at.is_(None))).first()
            pending = s.scalars(select(OutboxItem.id).where(OutboxItem.done_at.is_(None))).first()
        return busy is None and pending is None


@pytest.fixture
def flow(tmp_path: Path) -> Iterator[Flow]:
    with make_flow(tmp_path) as made:
        yield made


@pytest.fixture
def flow_any_db(tmp_path: Path, db_url: str) -> Iterator[Flow]:
    with make_flow(tmp_path, db_url=db_url) as made:
        yield made


@dataclass
class World:
    """The sandbox with acme/kernels and PR #1 by alice (head `head`; `next_head` is pushed by
    tests that push), and what the service needs to act as the bot."""

    url: str
    admin: SandboxAdmin
    auth: dict[str, Any]
    pr: int
    head: str
    next_head: str


@contextmanager
def sandbox_world(
    tmp_path: Path,
    *,
    app: bool = False,
    private: bool = False,
    base_files: Mapping[str, str] | None = None,
    head_files: Mapping[str, str] | None = None,
) -> Iterator[World]:
    """The sandbox under uvicorn with its users, repository and pull request; the bot is a token
    user, or a GitHub App when `app`. `base_files` are committed on main (the PR's base),
    `head_files` in the PR's head commit."""
    repo = tmp_path / "kernels"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "README.md").write_text("kernels\n")
    _write_files(repo, base_files or {})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "initial")
    git(repo, "checkout", "-q", "-b", "feature")
    (repo / "op.py").write_text("x = 1\n")
    _write_files(repo, head_files or {})
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "op")
    head = git(repo, "rev-parse", "HEAD")
    (repo / "op.py").write_text("x = 2\n")
    git(repo, "commit", "-q", "-am", "op again")
    next_head = git(repo, "rev-parse", "HEAD")
    git(repo, "checkout", "-q", "main")

    with live_server(create_sandbox()) as gh_url, SandboxAdmin(gh_url) as admin:
        admin.create_user("acme", "Organization")
        for login in ("alice", "mallory"):
            admin.create_user(login)
        admin.create_user(BOT, "Bot")
        token = admin.create_token(BOT)
        auth: dict[str, Any] = {"github_token": token, "bot_login": BOT}
        if app:
            key_pem, public_pem = rsa_keypair()
            admin.register_app(APP_ID, public_pem, slug="ondemand")
            auth = {"github_app_id": APP_ID, "github_private_key": key_pem}
        admin.create_repo("acme", "kernels", str(repo), private=private)
        admin.set_permission(REPO, "alice", "write")
        admin.set_permission(REPO, "mallory", "read")
        if private:
            admin.set_permission(REPO, BOT, "write")  # a private repository hides from others
        pr = admin.open_pull(REPO, head=head, base="main", user="alice", title="Add op")
        yield World(gh_url, admin, auth, int(pr["number"]), head, next_head)


def _write_files(repo: Path, files: Mapping[str, str]) -> None:
    """Write each file (a path relative to `repo`: its text), making its folders."""
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)


@contextmanager
def make_flow(
    tmp_path: Path,
    *,
    app: bool = False,
    db_url: str | None = None,
    private: bool = False,
    base_files: Mapping[str, str] | None = None,
    head_files: Mapping[str, str] | None = None,
    **overrides: Any,
) -> Iterator[Flow]:
    """The sandbox world, the service wired to it (settings compressed for tests, `overrides`
    on top), and the sandbox's webhook pointing at the service."""
    with sandbox_world(
        tmp_path, app=app, private=private, base_files=base_files, head_files=head_files
    ) as world:
        compressed: dict[str, Any] = {
            "lease_seconds": 30,
            "retry_max_backoff_s": 0.5,
            "github_outage_probe_max_s": 0.5,
            "github_secondary_wait_s": 1.0,  # GitHub says a minute; compressed here
            "head_wait_s": 3.0,
        }
        settings = service_settings(
            db_url or sqlite_at_head(tmp_path / "flow.db"),
            github_api_url=world.url,
            **{**compressed, **world.auth, **overrides},
        )
        with live_service(settings) as svc:
            world.admin.set_webhook(f"{svc.url}/webhook", SECRET)
            yield Flow(world.admin, svc, world.pr, world.head, world.next_head)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def seed_result(sha: str) -> JobResult:
    rows = [
        BenchmarkRow(
            dtype=d, size=[1, 1, 4, 4, 4], reference_ms=0.0086, kernel_ms=0.0044, speedup=1.95
        )
        for d in ("float16", "float32")
    ]
    return JobResult(
        status=JobStatus.succeeded,
        sha=sha,
        accuracy=AccuracyResult(passed=69, skipped=3),
        benchmark=BenchmarkResult(op="add", rows=rows, arithmetic_mean_speedup=1.95),
    )


def test_comment_to_result_updated_in_place(flow_any_db: Flow) -> None:
    flow = flow_any_db
    command = flow.comment("Looks good.\n\n/test | add:cpu")
    # acknowledgement: reaction, pending status, one "queued" comment
    flow.admin.wait("reaction", comment_id=command["id"], content="eyes")
    flow.admin.wait("status", sha=flow.head, context="ondemand/add:cpu")
    status = flow.admin.statuses(REPO, flow.head)[0]
    assert status["state"] == "pending" and status["context"] == "ondemand/add:cpu"
    job = flow.jobs()[0]
    assert job.sha == flow.head and job.op == "add" and job.backend == "cpu"
    assert status["target_url"] == f"http://ondemand.test/jobs/{job.id}"
    queued = flow.admin.wait_for_comment(REPO, flow.pr, user=BOT, contains="ondemand:add:cpu")
    assert "no runner online" in queued["body"] or "queued" in queued["body"].lower()

    # a runner takes it and finishes
    _, token = flow.svc.register("cpu-1", ["cpu"])
    api = f"{flow.svc.url}/api/v1/jobs"
    spec = httpx.post(f"{api}/claim", json={"wait_s": 5}, headers=auth(token), timeout=10).json()
    assert spec["id"] == job.id and spec["sha"] == flow.head and spec["clone_url"]
    flow.wait_until(lambda: len(flow.bot_comments()[0]["history"]) >= 1)
    result = seed_result(flow.head).model_dump(mode="json")
    done = httpx.post(f"{api}/{job.id}/complete", json=result, headers=auth(token))
    assert done.json() == {"status": "succeeded"}
    flow.wait_until(lambda: "69 passed" in flow.bot_comments()[0]["body"])
    flow.wait_until(flow.quiet)

    comments = flow.bot_comments()
    assert len(comments) == 1  # one comment, edited in place
    assert comments[0]["id"] == queued["id"]
    assert len(comments[0]["history"]) >= 1
    states = [s["state"] for s in flow.admin.statuses(REPO, flow.head)]
    assert states[0] == "pending" and states[-1] == "success"
    # a second run of the same triple keeps the first as history in the same comment
    flow.comment("/test add:cpu")
    flow.wait_until(lambda: len(flow.jobs()) == 2)
    flow.wait_until(flow.quiet)
    comments = flow.bot_comments()
    assert len(comments) == 1 and "Earlier runs" in comments[0]["body"]


def test_untrusted_help_errors_and_duplicates(flow: Flow) -> None:
    flow.comment("/test add:cpu", user="mallory")
    refused = flow.admin.wait_for_comment(REPO, flow.pr, user=BOT, contains="mallory")
    assert "read" in refused["body"]
    flow.comment("/test help", user="mallory")  # help is for everyone
    flow.admin.wait_for_comment(REPO, flow.pr, user=BOT, contains="cpu")
    flow.comment("/test add:cpux")
    error = flow.admin.wait_for_comment(REPO, flow.pr, user=BOT, contains="cpux")
    assert "cpu" in error["body"]
    flow.wait_until(flow.quiet)
    assert flow.jobs() == []

    flow.comment("/test add:cpu")
    flow.wait_until(lambda: len(flow.jobs()) == 1)
    flow.comment("/test add:cpu")
    job_id = flow.jobs()[0].id
    dup = flow.admin.wait_for_comment(REPO, flow.pr, user=BOT, contains="already queued")
    assert f"/jobs/{job_id}" in dup["body"]
    flow.wait_until(flow.quiet)
    assert len(flow.jobs()) == 1


def test_push_supersedes_and_close_cancels(flow: Flow) -> None:
    flow.comment("/test add,mul:cpu")
    flow.wait_until(lambda: len(flow.jobs()) == 2)
    flow.admin.push(REPO, flow.pr, flow.next_head)
    flow.wait_until(lambda: all(j.status == JobStatus.superseded for j in flow.jobs()))
    assert all(j.reason == f"superseded by {flow.next_head[:7]}" for j in flow.jobs())
    time.sleep(1.05)  # GitHub's clock counts seconds: approve the push a second after it
    flow.comment("/test add:cpu")  # the new head needs a new approval
    flow.wait_until(lambda: len(flow.jobs()) == 3)
    assert flow.jobs()[-1].sha == flow.next_head
    flow.admin.close_pull(REPO, flow.pr)
    flow.wait_until(lambda: flow.jobs()[-1].status == JobStatus.cancelled)
    flow.wait_until(flow.quiet)
    # Superseded: no verdict on the old head, and not a failure of its code (statuses know no
    # "cancelled"): pending, saying why.
    newest: dict[str, dict[str, Any]] = {}
    for status in flow.admin.statuses(REPO, flow.head):  # oldest first
        newest[status["context"]] = status
    assert sorted(newest) == ["ondemand/add:cpu", "ondemand/mul:cpu"]
    for status in newest.values():
        assert status["state"] == "pending", status
        assert status["description"] == f"superseded by {flow.next_head[:7]}"


def test_cancel_and_retest_commands(flow: Flow) -> None:
    flow.comment("/test add,mul:cpu")
    flow.wait_until(lambda: len(flow.jobs()) == 2)
    flow.comment("/test cancel mul")
    flow.wait_until(lambda: flow.jobs()[1].status == JobStatus.cancelled)
    assert flow.jobs()[0].status == JobStatus.queued
    _, token = flow.svc.register("cpu-1", ["cpu"])
    api = f"{flow.svc.url}/api/v1/jobs"
    spec = httpx.post(f"{api}/claim", json={}, headers=auth(token)).json()
    failed = JobResult(status=JobStatus.failed, sha=spec["sha"]).model_dump(mode="json")
    httpx.post(f"{api}/{spec['id']}/complete", json=failed, headers=auth(token))
    flow.comment("/retest")
    flow.wait_until(lambda: len(flow.jobs()) == 3)
    again = flow.jobs()[-1]
    assert (again.op, again.backend, again.status) == ("add", "cpu", JobStatus.queued)


def test_outbox_survives_faults_and_posts_once(flow: Flow) -> None:
    flow.admin.inject_fault(502, 2, path_prefix=f"/repos/{REPO}/issues")
    flow.admin.inject_fault(429, 1, path_prefix=f"/repos/{REPO}/statuses", retry_after=1)
    flow.admin.inject_fault(500, 1, path_prefix=f"/repos/{REPO}/collaborators")
    command = flow.comment("/test add:cpu")
    flow.wait_until(lambda: len(flow.jobs()) == 1, timeout=15)
    flow.wait_until(flow.quiet, timeout=20)
    assert flow.admin.state()["faults"] == []  # every fault was hit, and got through
    with flow.svc.service.db.reads() as session:
        retried = session.scalars(select(OutboxItem).where(OutboxItem.attempts > 1)).all()
    assert {item.kind for item in retried} >= {"status", "reaction"}
    assert any("429" in (item.last_error or "") or item.attempts > 1 for item in retried)
    assert len([c for c in flow.bot_comments() if "ondemand:add:cpu" in c["body"]]) == 1
    reactions = next(c for c in flow.admin.comments(REPO, flow.pr) if c["id"] == command["id"])
    assert [r["content"] for r in reactions["reactions"]] == ["eyes"]
    statuses = flow.admin.statuses(REPO, flow.head)
    assert [s["state"] for s in statuses] == ["pending"]
    # a redelivery of the same webhook changes nothing
    delivery = next(d for d in flow.admin.deliveries() if d["event"] == "issue_comment")
    flow.admin.redeliver(delivery["id"])
    time.sleep(0.3)
    flow.wait_until(flow.quiet)
    assert len(flow.jobs()) == 1 and len(flow.bot_comments()) == 1


def test_as_a_github_app(tmp_path: Path) -> None:
    with make_flow(tmp_path, app=True) as flow:
        command = flow.comment("/test add:cpu")
        flow.admin.wait("reaction", comment_id=command["id"], content="eyes")
        posted = flow.admin.wait_for_comment(
            REPO, flow.pr, user="ondemand[bot]", contains="ondemand:add:cpu"
        )
        assert posted["user"] == "ondemand[bot]"
        flow.wait_until(flow.quiet)
        # As an App, the job is a check run, not a commit status.
        assert flow.admin.statuses(REPO, flow.head) == []
        runs = httpx.get(f"{flow.admin.base_url}/repos/{REPO}/commits/{flow.head}/check-runs")
        job_runs = [r for r in runs.json()["check_runs"] if r["name"] != "ondemand"]
        assert [r["status"] for r in job_runs] == ["queued"]


def test_a_lost_create_answer_does_not_post_twice(flow: Flow) -> None:
    """The create of a result comment reached GitHub but its answer was lost (a crash): the
    retry finds the comment by its marker instead of posting another."""
    flow.comment("/test add:cpu")
    first = flow.admin.wait_for_comment(REPO, flow.pr, user=BOT, contains="ondemand:add:cpu")
    flow.wait_until(flow.quiet)
    service = flow.svc.service
    with service.db.writes() as session, session.begin():
        row = session.scalars(select(ResultComment)).one()
        row.github_comment_id = None  # as if the id was never stored
        session.add(
            OutboxItem(
                kind="comment",
                key=f"comment:{row.id}",
                payload={"repo": REPO, "pr_number": flow.pr, "row_id": row.id},
                attempts=1,  # a previous attempt happened
            )
        )
    service.outbox.kick()
    flow.wait_until(flow.quiet)
    with service.db.reads() as session:
        assert session.scalars(select(ResultComment)).one().github_comment_id == first["id"]
    assert len(flow.bot_comments()) == 1


def test_queued_comments_show_their_moving_position(flow: Flow) -> None:
    _, token = flow.svc.register("cpu-1", ["cpu"])
    flow.comment("/test add,mul:cpu")
    flow.wait_until(lambda: len(flow.jobs()) == 2)
    flow.wait_until(flow.quiet)

    def mul_comment() -> str:
        return next(c["body"] for c in flow.bot_comments() if "ondemand:mul:cpu" in c["body"])

    assert "queued, position 2 on cpu" in mul_comment()
    httpx.post(f"{flow.svc.url}/api/v1/jobs/claim", json={}, headers=auth(token))
    flow.wait_until(lambda: "queued, position 1 on cpu" in mul_comment())


def test_a_deleted_result_comment_is_posted_again(flow: Flow) -> None:
    flow.comment("/test add:cpu")
    first = flow.admin.wait_for_comment(REPO, flow.pr, user=BOT, contains="ondemand:add:cpu")
    flow.wait_until(flow.quiet)
    flow.admin.delete_comment(REPO, first["id"], user="alice")
    _, token = flow.svc.register("cpu-1", ["cpu"])
    httpx.post(f"{flow.svc.url}/api/v1/jobs/claim", json={}, headers=auth(token))
    flow.wait_until(flow.quiet)
    (again,) = [c for c in flow.bot_comments() if "ondemand:add:cpu" in c["body"]]
    assert again["id"] != first["id"] and "running" in again["body"]


def test_a_secondary_rate_limit_delays_the_answer_but_never_drops_it(flow_any_db: Flow) -> None:
    flow = flow_any_db
    """403, requests remaining, no `Retry-After`: GitHub's usual secondary limit. Every POST
    of a comment fails three times in a row; the help reply still arrives."""
    flow.admin.inject_fault(
        403,
        3,
        path_prefix=f"/repos/{REPO}/issues/{flow.pr}/comments",
        method="POST",
        kind="secondary",
    )
    flow.comment("/test help")
    reply = flow.admin.wait_for_comment(REPO, flow.pr, user=BOT, contains="On-demand", timeout=30)
    assert "/test OP:BACKEND" in reply["body"]
    flow.wait_until(flow.quiet)
    with flow.svc.service.db.reads() as session:
        items = session.scalars(select(OutboxItem).where(OutboxItem.kind == "reply")).all()
    assert [i.attempts for i in items] == [4] and all(i.outcome for i in items)


def test_a_comment_of_many_bad_commands_gets_one_reply_within_githubs_limit(
    flow_any_db: Flow,
) -> None:
    flow = flow_any_db
    flow.comment("\n".join(f"/test op{i}:tpu --bad-flag {'x' * 200}" for i in range(150)))
    reply = flow.admin.wait_for_comment(REPO, flow.pr, user=BOT, contains="could not run")
    body = reply["body"]
    assert len(body) <= 65536
    # one comment holds 20 commands; the rest get one answer that says so
    assert body.count("I could not run this command") == 21
    assert "130 more command lines were not read" in body


def test_a_misspelt_operator_is_answered_at_once_and_queues_nothing(flow_any_db: Flow) -> None:
    flow = flow_any_db
    flow.comment("/test add:cpu")
    flow.wait_until(lambda: len(flow.jobs()) == 1)
    _, token = flow.svc.register("cpu-1", ["cpu"])
    api = f"{flow.svc.url}/api/v1/jobs"
    spec = httpx.post(f"{api}/claim", json={"wait_s": 5}, headers=auth(token), timeout=30).json()
    done = JobResult(
        status=JobStatus.succeeded, sha=spec["sha"], operators=["add", "mul", "adaptive_pool"]
    )
    answer = httpx.post(
        f"{api}/{spec['id']}/complete", json=done.model_dump(mode="json"), headers=auth(token)
    )
    assert answer.status_code == 200
    # this very commit was tested: its operators are known for certain
    flow.comment("/test ad:cpu")
    reply = flow.admin.wait_for_comment(REPO, flow.pr, user=BOT, contains="has no operator")
    assert "`add`" in reply["body"] and flow.head[:7] in reply["body"]
    flow.wait_until(flow.quiet)
    assert len(flow.jobs()) == 1
    # another commit: only a near miss of a known operator is answered at once ...
    flow.admin.push(REPO, flow.pr, flow.next_head)
    time.sleep(1.05)
    flow.comment("/test adaptive_pol:cpu")
    near = flow.admin.wait_for_comment(REPO, flow.pr, user=BOT, contains="did you mean")
    assert "`adaptive_pool`" in near["body"] and "--new-op" in near["body"]
    flow.wait_until(flow.quiet)
    assert [j.op for j in flow.jobs()] == ["add"]
    # ... and a new operator of the pull request is queued when it says so, or not near any
    flow.comment("/test adaptive_pol:cpu --new-op\n/test brand_new:cpu")
    flow.wait_until(lambda: len(flow.jobs()) == 3)
    assert [j.op for j in flow.jobs()][1:] == ["adaptive_pol", "brand_new"]
    assert all(j.sha == flow.next_head for j in flow.jobs()[1:])
    flow.comment("/test help")
    helped = flow.admin.wait_for_comment(REPO, flow.pr, user=BOT, contains="recently tested")
    assert "`adaptive_pool`, `add`, `mul`" in helped["body"]


def test_a_private_repositorys_links_carry_their_key(tmp_path: Path) -> None:
    with make_flow(tmp_path, private=True) as flow:
        flow.comment("/test add:cpu")
        flow.admin.wait("status", sha=flow.head, context="ondemand/add:cpu")
        (status,) = flow.admin.statuses(REPO, flow.head)
        job = flow.jobs()[0]
        assert job.private
        key = flow.svc.service.links.key(job.id)
        assert status["target_url"] == f"http://ondemand.test/jobs/{job.id}?key={key}"
        comment = flow.admin.wait_for_comment(REPO, flow.pr, user=BOT, contains="ondemand:add")
        assert f"/jobs/{job.id}?key={key}" in comment["body"]
        assert httpx.get(f"{flow.svc.url}/jobs/{job.id}").status_code == 404
        assert httpx.get(f"{flow.svc.url}/jobs/{job.id}?key={key}").status_code == 200


def test_a_status_whose_answer_was_lost_is_not_posted_twice(tmp_path: Path) -> None:
    """GitHub sets the status but the answer never reaches the service (a 502 after the write,
    or the replica dies before it records the item done): the retry finds the status standing
    and posts no second one."""
    with make_flow(tmp_path) as flow:
        prefix = f"/repos/{REPO}/statuses"
        flow.admin.inject_fault(502, 1, path_prefix=prefix, method="POST", applied=True)
        flow.comment("/test add:cpu")
        flow.admin.wait("status", sha=flow.head, context="ondemand/add:cpu")
        flow.wait_until(lambda: not flow.admin.state()["faults"])
        flow.wait_until(flow.quiet)
        statuses = flow.admin.statuses(REPO, flow.head)
        assert [(s["context"], s["state"]) for s in statuses] == [("ondemand/add:cpu", "pending")]
        posts = [c for c in flow.admin.state()["api_calls"] if c["path"].startswith(prefix)]
        assert [c["status"] for c in posts if c["method"] == "POST"] == [502]
