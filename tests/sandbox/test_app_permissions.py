"""An App installation's permissions, as GitHub enforces them: an installation has what its
owner accepted (by default everything this project's manifest asks for), `GET
/app/installations` shows it, its tokens carry no more, and a call that needs a permission it
lacks is answered 403 "Resource not accessible by integration" naming what would do; reading a
public repository needs none. Granting more delivers `installation`
`new_permissions_accepted`; taking some away is not announced."""

from __future__ import annotations

from pathlib import Path

import pytest
from github import Auth, Github, GithubException, GithubIntegration

from ondemand.git import GitError, Mirrors
from sandbox.client import SandboxAdminError
from service.github.permissions import manifest
from tests.sandbox.conftest import REPO, SECRET, Receiver, World, git
from tests.support.keys import rsa_keypair

APP_ID = 4545
SECRET_REPO = "acme/secret"
EVERYTHING = manifest("ondemand", "http://x", teams=True)["default_permissions"]
WITHOUT_CONTENTS = {k: v for k, v in EVERYTHING.items() if k != "contents"}


def _app(world: World, tmp_path: Path) -> tuple[GithubIntegration, int]:
    """The App on acme, and a private acme/secret (a copy of acme/kernels) with PR #1."""
    admin = world.sandbox.admin
    copy = tmp_path / "secret"
    git(tmp_path, "clone", "-q", str(world.repo.path), str(copy))
    admin.create_repo("acme", "secret", str(copy), private=True)
    admin.open_pull(SECRET_REPO, head=world.repo.feature_sha, user="alice", title="Secret op")
    private, public = rsa_keypair()
    installed = admin.register_app(APP_ID, public, account="acme")
    app = GithubIntegration(auth=Auth.AppAuth(APP_ID, private), base_url=world.sandbox.url)
    return app, int(installed["installation_id"])


def _token(app: GithubIntegration, installation: int, **asked: object) -> str:
    path = f"/app/installations/{installation}/access_tokens"
    return str(app.requester.requestJsonAndCheck("POST", path, input=asked or None)[1]["token"])


def _refused(call: object) -> GithubException:
    with pytest.raises(GithubException) as err:
        call()  # type: ignore[operator]
    assert err.value.status == 403
    assert err.value.data["message"] == "Resource not accessible by integration"
    assert err.value.data["documentation_url"].startswith("https://docs.github.com/")
    return err.value


def test_an_installation_has_what_the_manifest_asks_for_until_told_otherwise(
    world: World, tmp_path: Path
) -> None:
    app, installation = _app(world, tmp_path)
    assert [i.permissions for i in app.get_installations()] == [EVERYTHING]
    assert app.get_app_installation(installation).permissions == EVERYTHING

    changed = world.sandbox.admin.set_installation_permissions(installation, WITHOUT_CONTENTS)
    assert changed["event"] is None  # taking away is not announced
    assert app.get_app_installation(installation).permissions == WITHOUT_CONTENTS
    assert world.sandbox.admin.state()["installations"][0]["permissions"] == WITHOUT_CONTENTS
    with pytest.raises(GithubException) as err:  # a token carries no more than the installation
        _token(app, installation, permissions={"contents": "read"})
    assert err.value.status == 422 and "not granted" in err.value.data["message"]


def test_a_call_needs_its_permission(world: World, tmp_path: Path) -> None:
    app, installation = _app(world, tmp_path)
    admin = world.sandbox.admin
    admin.set_installation_permissions(installation, WITHOUT_CONTENTS)
    gh = world.sandbox.github(_token(app, installation))
    secret = gh.get_repo(SECRET_REPO)
    err = _refused(lambda: secret.get_contents("README.md"))
    assert err.headers["x-accepted-github-permissions"] == "contents=read"
    _refused(lambda: secret.get_commit(world.repo.feature_sha))
    assert gh.get_repo(REPO).get_contents("README.md").decoded_content == b"kernels\n"  # public
    assert secret.get_pull(1).head.sha == world.repo.feature_sha  # pull requests: read

    # Git over HTTP: the same token may see the private repository, not fetch it.
    token = _token(app, installation)
    with pytest.raises(GitError, match="403"):
        Mirrors(tmp_path / "cache").fetch(
            f"{world.sandbox.url}/{SECRET_REPO}.git", world.repo.feature_sha, 1, token=token
        )

    # Writes: comments and reactions need issues (or pull requests) write, check runs checks
    # write, statuses statuses write (which the manifest never asks for: an App writes checks).
    admin.set_installation_permissions(installation, {**EVERYTHING, "issues": "read"})
    gh = world.sandbox.github(_token(app, installation))
    issue = gh.get_repo(REPO).get_issue(1)
    err = _refused(lambda: issue.create_comment("hello"))
    assert err.headers["x-accepted-github-permissions"] == "issues=write; pull_requests=write"
    assert issue.get_comments().totalCount == 0  # reading it is fine
    checks = {"name": "ondemand/add:cpu", "head_sha": world.repo.feature_sha}
    requester = gh.requester
    created = requester.requestJsonAndCheck("POST", f"/repos/{REPO}/check-runs", input=checks)
    err = _refused(
        lambda: requester.requestJsonAndCheck(
            "POST", f"/repos/{REPO}/statuses/{world.repo.feature_sha}", input={"state": "success"}
        )
    )
    assert err.headers["x-accepted-github-permissions"] == "statuses=write"

    admin.set_installation_permissions(installation, {**EVERYTHING, "checks": "read"})
    held = _token(app, installation)
    run = f"/repos/{REPO}/check-runs/{created[1]['id']}"
    _refused(
        lambda: world.sandbox.github(held).requester.requestJsonAndCheck(
            "PATCH", run, input={"status": "in_progress"}
        )
    )


def test_a_token_carries_what_it_was_minted_with_within_what_is_granted_now(
    world: World, tmp_path: Path
) -> None:
    app, installation = _app(world, tmp_path)
    admin = world.sandbox.admin
    before = world.sandbox.github(_token(app, installation))
    assert before.get_repo(SECRET_REPO).get_contents("README.md").decoded_content == b"kernels\n"
    admin.set_installation_permissions(installation, WITHOUT_CONTENTS)
    _refused(lambda: before.get_repo(SECRET_REPO).get_contents("README.md"))
    during = world.sandbox.github(_token(app, installation))
    admin.set_installation_permissions(installation, EVERYTHING)
    assert before.get_repo(SECRET_REPO).get_contents("README.md").decoded_content == b"kernels\n"
    # Minted while it lacked contents: it never gets them; a new token does.
    _refused(lambda: during.get_repo(SECRET_REPO).get_contents("README.md"))


def test_team_memberships_need_members_read(world: World, tmp_path: Path) -> None:
    app, installation = _app(world, tmp_path)
    world.sandbox.admin.create_team("acme", "kernel-team", ["alice"])
    path = "/orgs/acme/teams/kernel-team/memberships/alice"
    gh = world.sandbox.github(_token(app, installation))
    assert gh.requester.requestJsonAndCheck("GET", path)[1]["state"] == "active"
    world.sandbox.admin.set_installation_permissions(
        installation, {k: v for k, v in EVERYTHING.items() if k != "members"}
    )
    held: Github = world.sandbox.github(_token(app, installation))
    _refused(lambda: held.requester.requestJsonAndCheck("GET", path))


def test_granting_more_tells_the_app(world: World, tmp_path: Path, receiver: Receiver) -> None:
    app, installation = _app(world, tmp_path)
    admin = world.sandbox.admin
    admin.set_installation_permissions(installation, WITHOUT_CONTENTS)
    admin.set_webhook(receiver.url, SECRET)
    answer = admin.set_installation_permissions(installation, EVERYTHING, user="alice")
    assert answer["event"] == "new_permissions_accepted"
    (got,) = receiver.wait(1)
    assert got.event == "installation" and got.signature_ok
    assert got.payload["action"] == "new_permissions_accepted"
    assert got.payload["installation"]["id"] == installation
    assert got.payload["installation"]["account"]["login"] == "acme"
    assert got.payload["installation"]["permissions"] == EVERYTHING
    assert got.payload["sender"]["login"] == "alice"
    gh = world.sandbox.github(_token(app, installation))
    assert gh.get_repo(SECRET_REPO).get_contents("README.md").decoded_content == b"kernels\n"
    with pytest.raises(SandboxAdminError) as refused:
        admin.set_installation_permissions(installation, {"contents": "none"})
    assert refused.value.status == 422
