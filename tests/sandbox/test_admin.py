"""The admin API's own contract: clear errors for bad setups, the wait helper, the state
snapshot, and `ondemand sandbox` as a real process."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from sandbox.cli import parse_args
from sandbox.client import SandboxAdmin, SandboxAdminError
from tests.sandbox.conftest import REPO, GitRepo, Sandbox, World
from tests.support.live import free_port


def test_bad_setups_get_clear_errors(sandbox: Sandbox, git_repo: GitRepo, tmp_path: Path) -> None:
    admin = sandbox.admin
    with pytest.raises(SandboxAdminError) as err:
        admin.create_repo("acme", "kernels", str(tmp_path / "missing"))
    assert err.value.status == 422 and "git_path" in err.value.message
    admin.create_repo("acme", "kernels", str(git_repo.path))
    with pytest.raises(SandboxAdminError) as err:
        admin.create_repo("acme", "kernels", str(git_repo.path))
    assert err.value.status == 422
    with pytest.raises(SandboxAdminError) as err:
        admin.open_pull(REPO, head="feature", user="ghost")
    assert err.value.status == 404 and "ghost" in err.value.message
    admin.create_user("alice")
    with pytest.raises(SandboxAdminError) as err:
        admin.open_pull(REPO, head="feature", base="nope", user="alice")
    assert err.value.status == 422 and "nope" in err.value.message
    with pytest.raises(SandboxAdminError) as err:
        admin.open_pull(REPO, head="--upload-pack=evil", user="alice")
    assert err.value.status == 422
    with pytest.raises(SandboxAdminError) as err:
        admin.comment("acme/other", 1, "alice", "hi")
    assert err.value.status == 404
    with pytest.raises(SandboxAdminError) as err:
        admin.set_permission(REPO, "alice", "owner")  # type: ignore[arg-type]
    assert err.value.status == 422
    assert [p["number"] for p in admin.state()["pulls"]] == []


def test_closed_pull_requests_refuse_pushes(world: World) -> None:
    admin = world.sandbox.admin
    admin.close_pull(REPO, 1, merged=True)
    with pytest.raises(SandboxAdminError) as err:
        admin.push(REPO, 1, world.repo.feature2_sha)
    assert err.value.status == 422
    pull = world.sandbox.github(world.bot_token).get_repo(REPO).get_pull(1)
    assert pull.state == "closed" and pull.merged


def test_wait_returns_when_the_condition_holds(world: World) -> None:
    admin = world.sandbox.admin
    issue = world.sandbox.github(world.bot_token).get_repo(REPO).get_issue(1)
    with pytest.raises(TimeoutError):
        admin.wait_for_comment(REPO, 1, user="ondemand-bot", timeout=0.2)
    issue.create_comment("✅ add on cpu: 69 passed")
    found = admin.wait_for_comment(REPO, 1, user="ondemand-bot", contains="69 passed")
    assert found["body"].startswith("✅")
    sha = world.repo.feature_sha
    issue.repository.get_commit(sha).create_status("success", context="ondemand/add:cpu")
    (status,) = admin.wait("status", repo=REPO, sha=sha, state="success")
    assert status["context"] == "ondemand/add:cpu"
    version = admin.state()["version"]
    assert admin.wait("change", since=version - 1)[0]["version"] >= version


def test_state_snapshot_records_api_calls(world: World) -> None:
    world.sandbox.github(world.bot_token).get_repo(REPO).get_pull(1)
    state = world.sandbox.admin.state()
    assert {"GET /repos/acme/kernels/pulls/1 200 ondemand-bot"} <= {
        f"{c['method']} {c['path']} {c['status']} {c['login']}" for c in state["api_calls"]
    }
    assert state["repos"][0]["collaborators"] == {"alice": "write"}
    assert state["pulls"][0]["head_sha"] == world.repo.feature_sha


def test_cli_options() -> None:
    args = parse_args(["--port", "9001", "--webhook-url", "http://127.0.0.1:1/webhook"])
    assert (args.host, args.port, args.webhook_url) == (
        "127.0.0.1",
        9001,
        "http://127.0.0.1:1/webhook",
    )
    with pytest.raises(SystemExit):
        parse_args(["--port", "0"])


def test_ondemand_sandbox_runs_as_a_process() -> None:
    port = free_port()
    exe = Path(sys.executable).parent / "ondemand"
    proc = subprocess.Popen(
        [
            str(exe),
            "sandbox",
            "--port",
            str(port),
            "--webhook-url",
            "http://127.0.0.1:9/hook",
            "--webhook-secret",
            "abc",
            "--log-level",
            "warning",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                hook = httpx.get(f"{url}/_sandbox/webhook", timeout=1).json()
                break
            except httpx.HTTPError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        want = {"url": "http://127.0.0.1:9/hook", "has_secret": True, "content_type": "json"}
        assert hook == want
        with SandboxAdmin(url) as admin:
            admin.create_user("bot", "Bot")
            token = admin.create_token("bot")
        me = httpx.get(f"{url}/user", headers={"Authorization": f"token {token}"}).json()
        assert me["login"] == "bot" and me["type"] == "Bot"
    finally:
        proc.terminate()
        proc.wait(timeout=15)
