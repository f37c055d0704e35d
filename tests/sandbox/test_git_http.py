"""Git over the sandbox's smart HTTP, as GitHub serves it: a public repository to anyone, a
private one only with a token that may read it, and an installation token limited to one
repository and `contents: read` reads that repository and writes nothing. The client is git
itself, through the project's mirror code (`ondemand.git`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from github import Auth, GithubException, GithubIntegration

from ondemand.git import GitError, Mirrors
from tests.sandbox.conftest import REPO, World, git
from tests.support.keys import rsa_keypair

APP_ID = 4343


def _private(world: World, tmp_path: Path) -> str:
    """A second, private repository of acme (a copy of the first) with PR #1; its clone URL."""
    admin = world.sandbox.admin
    copy = tmp_path / "secret"
    git(tmp_path, "clone", "-q", str(world.repo.path), str(copy))
    admin.create_repo("acme", "secret", str(copy), private=True)
    admin.set_permission("acme/secret", "alice", "read")
    admin.open_pull("acme/secret", head=world.repo.feature_sha, user="alice", title="Secret op")
    return f"{world.sandbox.url}/acme/secret.git"


def test_a_private_repository_is_fetched_only_with_a_token_that_may_read_it(
    world: World, tmp_path: Path
) -> None:
    url = _private(world, tmp_path)
    admin = world.sandbox.admin
    alice = admin.create_token("alice")
    mallory = admin.create_token("mallory")
    gh = world.sandbox.github(alice)
    assert gh.get_repo("acme/secret").clone_url == url  # a private repository's is HTTP
    assert gh.get_repo(REPO).clone_url == str(world.repo.path)  # a public one's, the disk

    sha = world.repo.feature_sha
    mirrors = Mirrors(tmp_path / "cache")
    refused = ((None, "authentication failed"), (mallory, "not found"), ("ghp_x", "failed"))
    for token, why in refused:
        with pytest.raises(GitError) as err:
            mirrors.fetch(url, sha, 1, shallow=True, token=token)
        assert why.lower() in str(err.value).lower()
        assert (token or "ghp_x") not in str(err.value)  # the token is never in an error

    mirror = mirrors.fetch(url, sha, 1, shallow=True, token=alice)
    assert mirrors.has_commit(mirror, sha)
    config = (mirror / "config").read_text()
    assert alice not in config and "extraheader" not in config.lower()
    # The merge base's branch, then an unadvertised commit by its SHA, as the runner asks.
    mirrors.fetch_branch(mirror, url, "main", token=alice)
    assert git(mirror, "rev-parse", "refs/heads/main") == world.repo.main_sha
    mirrors.fetch(url, world.repo.feature2_sha, None, token=alice)
    assert mirrors.has_commit(mirror, world.repo.feature2_sha)


def test_a_public_repository_is_fetched_by_anyone_over_http(world: World, tmp_path: Path) -> None:
    url = f"{world.sandbox.url}/{REPO}.git"
    calls = len(world.sandbox.admin.state()["api_calls"])
    heads = subprocess.run(
        ["git", "ls-remote", "--", url], capture_output=True, text=True, check=True
    ).stdout
    assert f"{world.repo.feature_sha}\trefs/pull/1/head" in heads
    mirror = Mirrors(tmp_path / "cache").fetch(url, world.repo.feature_sha, 1, shallow=True)
    assert git(mirror, "rev-parse", f"{world.repo.feature_sha}^{{tree}}")
    assert len(world.sandbox.admin.state()["api_calls"]) == calls  # git is not a REST call


def test_a_read_token_for_one_repository_reads_it_and_nothing_else(
    world: World, tmp_path: Path
) -> None:
    url = _private(world, tmp_path)
    private, public = rsa_keypair()
    installed = world.sandbox.admin.register_app(APP_ID, public, slug="ondemand")
    app = GithubIntegration(auth=Auth.AppAuth(APP_ID, private), base_url=world.sandbox.url)
    asked = app.requester.requestJsonAndCheck(
        "POST",
        f"/app/installations/{installed['installation_id']}/access_tokens",
        input={"repositories": ["secret"], "permissions": {"contents": "read"}},
    )[1]
    assert asked["repository_selection"] == "selected"
    token = asked["token"]

    mirror = Mirrors(tmp_path / "cache").fetch(url, world.repo.feature_sha, 1, token=token)
    assert git(mirror, "rev-parse", "refs/pull/1/head") == world.repo.feature_sha
    gh = world.sandbox.github(token)
    assert gh.get_repo("acme/secret").private
    with pytest.raises(GithubException) as err:
        gh.get_repo(REPO)  # not among its repositories
    assert err.value.status == 404
    with pytest.raises(GithubException) as err:
        gh.get_repo("acme/secret").get_issue(1).create_comment("a read token writes nothing")
    assert err.value.status == 403

    with pytest.raises(GithubException) as err:
        app.requester.requestJsonAndCheck(
            "POST",
            f"/app/installations/{installed['installation_id']}/access_tokens",
            input={"repositories": ["nope"], "permissions": {"contents": "read"}},
        )
    assert err.value.status == 422
