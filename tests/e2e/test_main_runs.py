"""The default branch's own runs, end to end: the sandbox as GitHub (the App, a repository that
opts in with `main.on_push`, pull requests merged through its admin API, each merge delivered as
`push`), the real service on loopback and a real runner daemon on the cpu backend, each merge's
changed operator compared with the last default-branch commit that ran it.

Eight merges: the first three touch `gelu`, the second making its wrapper twice as dear (a
busy-wait in it); the fourth brings it back and starts `drift` dearer by 4 %, which four more
merges each make 4 % dearer again (no one merge beyond the 10 % threshold). The service is
restarted between the second merge and its run's result. Then: exactly one alert comment, on
the second merge's pull request, and exactly one `gelu` issue, closed with a comment by the
fourth merge's run; the drift found once by the window test (one comment on the merge whose run
found it, one open `drift` issue); every run once, each against the commit before it; the
jobs' check runs on the merge commits; nothing said twice after the restart."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from sqlalchemy import select

from sandbox.app import create_app as create_sandbox
from sandbox.client import SandboxAdmin
from service.app import create_app
from service.db.engine import Database, utcnow
from service.db.models import Delivery, HistoryPoint, Job, OutboxItem
from tests.e2e.mainrepo import BASE_COST_US, branch_with, make_main_repo
from tests.service.helpers import service_settings, sqlite_at_head
from tests.support.keys import rsa_keypair
from tests.support.live import free_port, live_server
from workflows.spec import WORKFLOWS_DIR

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
ROOT = Path(__file__).resolve().parents[2]
REPO = "acme/mainops"
APP_ID = 4848
SECRET = "new-secret"
REGISTRATION = "reg-token-main-runs"
BOT = "ondemand[bot]"
SLOW_US = 2 * BASE_COST_US


def _workflows(directory: Path) -> Path:
    """The cpu workflow with a device check that passes at once (the jobs need no torch), and
    whose steps' pytest loads no plugin the host has installed (the repository's tests use
    none; the runner's own are named with -p): a fifth of a second a job."""
    cpu = yaml.safe_load((WORKFLOWS_DIR / "cpu.yaml").read_text())
    cpu["device_check"] = ["{python}", "-c", "pass"]
    cpu["env"]["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cpu.yaml").write_text(yaml.safe_dump(cpu))
    return directory


@dataclass
class World:
    tmp: Path
    admin: SandboxAdmin
    repo: Path
    settings: Any
    port: int
    db: Database | None = None
    merged: list[tuple[int, str]] = field(default_factory=list)  # (pull request, merge sha)

    def merge(self, branch: str, changes: dict[str, tuple[int, str]]) -> tuple[int, str]:
        """A pull request of `changes` off main, opened and merged by alice."""
        branch_with(self.repo, branch, changes)
        number = int(self.admin.open_pull(REPO, head=branch, user="alice", title=branch)["number"])
        sha = str(self.admin.merge_pull(REPO, number, user="alice")["sha"])
        self.merged.append((number, sha))
        return number, sha

    def jobs(self) -> list[Job]:
        assert self.db is not None
        with self.db.reads() as session:
            return list(session.scalars(select(Job).order_by(Job.id)))

    def quiet(self) -> bool:
        assert self.db is not None
        with self.db.reads() as s:
            busy = s.scalars(select(Delivery.id).where(Delivery.done_at.is_(None))).first()
            pending = s.scalars(select(OutboxItem.id).where(OutboxItem.done_at.is_(None))).first()
        return busy is None and pending is None

    def statuses(self, sha: str | None = None) -> list[str]:
        """The jobs' statuses (of `sha`'s where given), oldest first: what a wait polls, read
        without each job's result."""
        assert self.db is not None
        query = select(Job.status).order_by(Job.id)
        with self.db.reads() as session:
            return list(session.scalars(query if sha is None else query.where(Job.sha == sha)))

    def settled(self, sha: str, ops: int) -> bool:
        """The run of `sha` made its `ops` jobs, each ended, and everything was said."""
        done = [s for s in self.statuses(sha) if s not in ("queued", "running")]
        return len(done) == ops and self.quiet()


def wait_until(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


@contextmanager
def serving(world: World) -> Iterator[None]:
    """The service on the world's port and database, as long as the block runs."""
    app = create_app(world.settings)
    world.db = app.state.service.db
    with live_server(app, port=world.port):
        yield


@contextmanager
def runner(url: str, workflows: Path, state: Path) -> Iterator[subprocess.Popen[bytes]]:
    log = (state.parent / "runner.log").open("ab")
    argv = [
        sys.executable, "-m", "ondemand", "runner", "--service", url, "--backend", "cpu",
        "--name", "runner-main", "--state-dir", str(state), "--workflows", str(workflows),
        "--poll-seconds", "1", "--check-interval", "300", "--grace-seconds", "2",
        "--backoff-max", "1", "--no-job-user",
    ]  # fmt: skip
    env = {**os.environ, "ONDEMAND_REGISTRATION_TOKEN": REGISTRATION}
    proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


@contextmanager
def world_of(tmp: Path) -> Iterator[World]:
    repo = tmp / "mainops"
    make_main_repo(repo)
    workflows = _workflows(tmp / "workflows")
    key_pem, public_pem = rsa_keypair()
    with live_server(create_sandbox()) as gh_url, SandboxAdmin(gh_url) as admin:
        admin.create_user("acme", "Organization")
        admin.create_user("alice")
        admin.register_app(APP_ID, public_pem, slug="ondemand")
        admin.create_repo("acme", "mainops", str(repo))
        admin.set_permission(REPO, "alice", "write")
        port = free_port()
        settings = service_settings(
            sqlite_at_head(tmp / "ondemand.db"),
            github_api_url=gh_url, github_app_id=APP_ID, github_private_key=key_pem,
            registration_tokens=[REGISTRATION], workflows_dir=workflows,
            changes_dir=tmp / "changes", lease_seconds=30, retry_max_backoff_s=0.5,
            github_outage_probe_max_s=0.5, public_url="http://ondemand.test",
        )  # fmt: skip
        admin.set_webhook(f"http://127.0.0.1:{port}/webhook", SECRET)
        yield World(tmp, admin, repo, settings, port)


def _bot_comments(admin: SandboxAdmin, number: int) -> list[dict[str, Any]]:
    return [c for c in admin.comments(REPO, number) if c["user"] == BOT]


def _push_recorded(world: World, sha: str) -> bool:
    return any(
        d["event"] == "push" and d["payload"]["after"] == sha and d["status_code"] == 202
        for d in world.admin.deliveries()
    )


def test_main_runs_alert_once_track_issues_and_find_a_drift(tmp_path: Path) -> None:
    with world_of(tmp_path) as world, ExitStack() as stack:
        url = f"http://127.0.0.1:{world.port}"
        down = stack.enter_context(ExitStack())
        down.enter_context(serving(world))
        daemon = stack.enter_context(runner(url, world.settings.workflows_dir, tmp_path / "runner"))
        first, _ = world.merge("gelu-note", {"gelu": (BASE_COST_US, "a comment")})
        wait_until(lambda: world.settled(world.merged[-1][1], 1), 180, "the first run")
        # The service stops between the merge and its run's result: the push is in its inbox,
        # the runner (held meanwhile, so no result can come first) has not claimed its job;
        # then the service starts again on the same database and the runner goes on.
        daemon.send_signal(signal.SIGSTOP)
        slow, slow_sha = world.merge("gelu-slow", {"gelu": (SLOW_US, "")})
        wait_until(lambda: _push_recorded(world, slow_sha), 30, "the push delivered")
        down.close()
        restarted = utcnow()
        stack.enter_context(serving(world))
        daemon.send_signal(signal.SIGCONT)
        wait_until(lambda: world.settled(slow_sha, 1), 180, "the slow run")
        (slow_job,) = [j for j in world.jobs() if j.sha == slow_sha]
        assert slow_job.finished_at is not None and slow_job.finished_at > restarted
        third, _ = world.merge("gelu-again", {"gelu": (SLOW_US, "still dear")})
        wait_until(lambda: world.settled(world.merged[-1][1], 1), 180, "the third run")
        fourth, _ = world.merge(
            "gelu-back", {"gelu": (BASE_COST_US, ""), "drift": (BASE_COST_US * 104 // 100, "")}
        )
        wait_until(lambda: world.settled(world.merged[-1][1], 2), 180, "the fourth run")
        cost = BASE_COST_US * 104 / 100
        for n in range(2, 6):
            cost *= 1.04
            world.merge(f"drift-{n}", {"drift": (round(cost), "")})
            wait_until(lambda: world.settled(world.merged[-1][1], 1), 180, f"drift run {n}")
        _assert_runs(world)
        _assert_alerts(world, first, slow, third, fourth)


def _assert_runs(world: World) -> None:
    """One job per merge and changed operator, none of a pull request, each compared with the
    commit the operator last ran on (the merge before it that touched it), all succeeded."""
    jobs = world.jobs()
    assert [(j.op, j.trigger, j.pr_number) for j in jobs] == [
        ("gelu", "push", 0), ("gelu", "push", 0), ("gelu", "push", 0),
        *sorted([("drift", "push", 0), ("gelu", "push", 0)]),
        ("drift", "push", 0), ("drift", "push", 0), ("drift", "push", 0), ("drift", "push", 0),
    ]  # fmt: skip
    assert all(j.status == "succeeded" and j.exact_base for j in jobs), [j.status for j in jobs]
    shas = [sha for _, sha in world.merged]
    gelu = [j for j in jobs if j.op == "gelu"]
    assert [j.sha for j in gelu] == shas[:4]
    assert [j.base_sha for j in gelu[1:]] == shas[:3]  # each against the last that ran it
    drift = [j for j in jobs if j.op == "drift"]
    assert [j.base_sha for j in drift[1:]] == shas[3:7]
    assert drift[0].base_sha == gelu[2].sha  # the first: against the push's parent
    assert world.db is not None
    with world.db.reads() as session:
        points = list(session.scalars(select(HistoryPoint).order_by(HistoryPoint.id)))
    assert [(p.op, p.verdict, p.mark) for p in points if p.op == "gelu"] == [
        ("gelu", "same", None), ("gelu", "slower", "slower"), ("gelu", "same", None),
        ("gelu", "faster", "faster"),
    ]  # fmt: skip
    drifted = [p for p in points if p.op == "drift"]
    assert all(p.verdict == "same" for p in drifted)  # no merge beyond the threshold alone
    assert [p.ratio for p in drifted] == pytest.approx([1.04] * 5, abs=0.005)
    assert [p.mark for p in drifted] == [None, None, "drift", None, None]  # found once
    runs = world.admin.state()["check_runs"]
    assert {r["head_sha"] for r in runs if r["name"] == "ondemand/gelu:cpu"} == set(shas[:4])


def _assert_alerts(world: World, first: int, slow: int, third: int, fourth: int) -> None:
    admin = world.admin
    (alert,) = _bot_comments(admin, slow)
    said = re.search(
        r"this merge made `gelu` float32 4096×4096 \+([\d.]+) % ±([\d.]+) %", alert["body"]
    )
    assert said is not None, alert["body"]
    assert float(said[1]) == pytest.approx(100, abs=2) and float(said[2]) < 2  # twice as dear
    assert "slower on `cpu`" in alert["body"]
    for quiet in (first, third, fourth):
        assert _bot_comments(admin, quiet) == [], quiet
    numbers = [n for n, _ in world.merged]
    drift_found = numbers[5]  # the sixth merge: the third +4 % in a row
    (drift,) = _bot_comments(admin, drift_found)
    assert "the default branch drifted: `drift` float32 4096×4096 +12." in drift["body"]
    assert "over its last 3 runs" in drift["body"]
    for later in numbers[6:]:
        assert _bot_comments(admin, later) == []
    issues = admin.issues(REPO)
    gelu = [i for i in issues if "gelu on cpu" in i["title"]]
    drifts = [i for i in issues if "drift on cpu" in i["title"]]
    assert len(gelu) == 1 and len(drifts) == 1, [i["title"] for i in issues]
    (gelu_issue,), (drift_issue,) = gelu, drifts
    assert gelu_issue["state"] == "closed" and gelu_issue["labels"][0]["name"] == (
        "ondemand:regression"
    )
    assert "recovered at" in gelu_issue["body"] and "one commit" in gelu_issue["body"]
    closing = [c for c in admin.comments(REPO, gelu_issue["number"]) if c["user"] == BOT]
    assert len(closing) == 1 and "recovered" in closing[0]["body"]
    assert drift_issue["state"] == "open" and "drift" in drift_issue["body"]
