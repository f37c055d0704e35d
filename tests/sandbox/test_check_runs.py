"""Check runs as GitHub has them, through PyGithub: only a GitHub App creates and updates
them (a user's token gets 403), on a commit by head SHA; a completed run needs a conclusion
and a conclusion completes it; an output needs a title and a summary within 65,535
characters (422 past it); the commit lists the newest run of each name; the Re-run button
(`rerequest`, write access) sends a signed `check_run` `rerequested` webhook."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from github import Auth, GithubException, GithubIntegration

from tests.sandbox.conftest import REPO, SECRET, Receiver, World
from tests.support.keys import rsa_keypair

APP_ID = 4242


def _app(world: World) -> tuple[Any, str]:
    """PyGithub as the App's installation, and its installation token."""
    private, public = rsa_keypair()
    world.sandbox.admin.register_app(APP_ID, public, slug="ondemand")
    app_auth = Auth.AppAuth(APP_ID, private)
    integration = GithubIntegration(auth=app_auth, base_url=world.sandbox.url)
    installation = integration.get_repo_installation("acme", "kernels")
    token = integration.get_access_token(installation.id).token
    return world.sandbox.github(auth=app_auth.get_installation_auth(installation.id)), token


def test_an_app_creates_updates_and_lists_check_runs(world: World) -> None:
    gh, _ = _app(world)
    repo = gh.get_repo(REPO)
    sha = world.repo.feature_sha
    run = repo.create_check_run(
        name="ondemand/add:cpu",
        head_sha=sha,
        status="in_progress",
        external_id="17",
        details_url="http://ondemand.test/jobs/17",
        output={"title": "running", "summary": "12/411 tests"},
    )
    assert run.status == "in_progress" and run.conclusion is None
    assert run.head_sha == sha and run.external_id == "17"
    assert run.app.slug == "ondemand" and run.pull_requests[0].number == 1
    run.edit(
        conclusion="cancelled",
        output={"title": "cancelled by @alice", "summary": "s", "text": "the report"},
    )
    fresh = repo.get_check_run(run.id)
    assert fresh.status == "completed" and fresh.conclusion == "cancelled"
    assert fresh.completed_at is not None
    assert fresh.output.title == "cancelled by @alice" and fresh.output.text == "the report"
    # A second run of the same name: the commit lists the newest (all of them on request).
    repo.create_check_run(name="ondemand/add:cpu", head_sha=sha, status="queued")
    repo.create_check_run(name="ondemand/mul:cpu", head_sha=sha, status="queued")
    listed = list(repo.get_commit(sha).get_check_runs())
    assert sorted(r.name for r in listed) == ["ondemand/add:cpu", "ondemand/mul:cpu"]
    assert next(r for r in listed if r.name == "ondemand/add:cpu").status == "queued"
    assert repo.get_commit(sha).get_check_runs(filter="all").totalCount == 3
    assert repo.get_commit(sha).get_check_runs(check_name="ondemand/mul:cpu").totalCount == 1


def test_bad_input_is_422_as_on_github(world: World) -> None:
    _, token = _app(world)
    api = f"{world.sandbox.url}/repos/{REPO}/check-runs"
    headers = {"Authorization": f"token {token}"}
    sha = world.repo.feature_sha

    def post(body: dict[str, Any]) -> httpx.Response:
        return httpx.post(api, json=body, headers=headers)

    assert post({"head_sha": sha}).status_code == 422  # no name
    assert post({"name": "x"}).status_code == 422  # no head_sha
    assert post({"name": "x", "head_sha": "f" * 40}).status_code == 422  # no such commit
    assert post({"name": "x", "head_sha": sha, "status": "done"}).status_code == 422
    assert post({"name": "x", "head_sha": sha, "conclusion": "red"}).status_code == 422
    assert post({"name": "x", "head_sha": sha, "status": "completed"}).status_code == 422
    no_title = {"name": "x", "head_sha": sha, "output": {"summary": "s"}}
    assert post(no_title).status_code == 422
    limit = 65535
    too_long = {
        "name": "x",
        "head_sha": sha,
        "output": {"title": "t", "summary": "s" * (limit + 1)},
    }
    answer = post(too_long)
    assert answer.status_code == 422 and "65535" in answer.json()["message"]
    long_text = {"title": "t", "summary": "s", "text": "t" * (limit + 1)}
    assert post({"name": "x", "head_sha": sha, "output": long_text}).status_code == 422
    just = {"name": "x", "head_sha": sha, "output": {"title": "t", "summary": "s" * limit}}
    created = post(just)
    assert created.status_code == 201 and created.json()["status"] == "queued"
    edit = httpx.patch(f"{api}/{created.json()['id']}", json={"status": "nope"}, headers=headers)
    assert edit.status_code == 422


def test_only_an_app_writes_check_runs(world: World) -> None:
    _app(world)
    user = world.sandbox.github(world.bot_token).get_repo(REPO)
    with pytest.raises(GithubException) as err:
        user.create_check_run(name="x", head_sha=world.repo.feature_sha)
    assert err.value.status == 403


def test_rerun_sends_a_signed_check_run_rerequested_webhook(
    world: World, receiver: Receiver
) -> None:
    gh, _ = _app(world)
    world.sandbox.admin.set_webhook(receiver.url, SECRET)
    run = gh.get_repo(REPO).create_check_run(
        name="ondemand/add:cpu", head_sha=world.repo.feature_sha, external_id="17"
    )
    alice = world.sandbox.admin.create_token("alice")
    mallory = world.sandbox.admin.create_token("mallory")
    url = f"{world.sandbox.url}/repos/{REPO}/check-runs/{run.id}/rerequest"
    refused = httpx.post(url, headers={"Authorization": f"token {mallory}"})
    assert refused.status_code == 403  # no write access: no Re-run button
    pressed = httpx.post(url, headers={"Authorization": f"token {alice}"})
    assert pressed.status_code == 201
    hooks = [r for r in receiver.wait(1) if r.event == "check_run"]
    assert len(hooks) == 1 and hooks[0].signature_ok
    payload = hooks[0].payload
    assert payload["action"] == "rerequested" and payload["sender"]["login"] == "alice"
    assert payload["check_run"]["id"] == run.id
    assert payload["check_run"]["external_id"] == "17"
    assert payload["check_run"]["head_sha"] == world.repo.feature_sha
    assert payload["repository"]["full_name"] == REPO and payload["installation"]["id"]
