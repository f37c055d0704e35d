"""Injected faults reach PyGithub as GitHub's own failures: 5xx, the primary rate limit (403,
`X-RateLimit-Remaining: 0`, `Retry-After`) and the secondary one (429)."""

from __future__ import annotations

import time

import pytest
from github import GithubException, GithubRetry, RateLimitExceededException

from sandbox.client import SandboxAdminError
from tests.sandbox.conftest import REPO, World


def test_server_errors_surface_then_clear(world: World) -> None:
    admin = world.sandbox.admin
    admin.inject_fault(502, count=2)
    gh = world.sandbox.github(world.bot_token)
    for _ in range(2):
        with pytest.raises(GithubException) as err:
            gh.get_repo(REPO)
        assert err.value.status == 502
    assert gh.get_repo(REPO).full_name == REPO
    assert admin.state()["faults"] == []


def test_pygithub_retries_through_a_transient_5xx(world: World) -> None:
    world.sandbox.admin.inject_fault(500, count=2, path_prefix="/repos/acme/kernels/pulls")
    gh = world.sandbox.github(world.bot_token, retry=GithubRetry(total=3, backoff_factor=0))
    repo = gh.get_repo(REPO)
    assert repo.get_pull(1).number == 1
    calls = [c for c in world.sandbox.admin.state()["api_calls"] if c["path"].endswith("/pulls/1")]
    assert [c["status"] for c in calls] == [500, 500, 200]


def test_primary_rate_limit(world: World) -> None:
    world.sandbox.admin.inject_fault(403, retry_after=7, method="POST")
    gh = world.sandbox.github(world.bot_token)
    issue = gh.get_repo(REPO).get_issue(1)  # GETs are not affected by a POST-only fault
    before = time.time()
    with pytest.raises(RateLimitExceededException) as err:
        issue.create_comment("queued")
    headers = {k.lower(): v for k, v in err.value.headers.items()}
    assert err.value.status == 403
    assert headers["x-ratelimit-remaining"] == "0"
    assert headers["retry-after"] == "7"
    assert int(headers["x-ratelimit-reset"]) >= int(before) + 6
    assert world.sandbox.admin.comments(REPO, 1) == []
    assert issue.create_comment("queued").body == "queued"


def test_secondary_rate_limit_and_path_prefix(world: World) -> None:
    world.sandbox.admin.inject_fault(429, retry_after=1, path_prefix="/repos/acme/kernels/statuses")
    gh = world.sandbox.github(world.bot_token)
    commit = gh.get_repo(REPO).get_commit(world.repo.feature_sha)
    with pytest.raises(GithubException) as err:
        commit.create_status("pending", context="ondemand/add:cpu")
    assert err.value.status == 429
    assert "secondary rate limit" in err.value.data["message"]
    assert err.value.headers["retry-after"] == "1"
    assert commit.create_status("pending", context="ondemand/add:cpu").state == "pending"


def test_bad_fault_specs_are_refused(world: World) -> None:
    with pytest.raises(SandboxAdminError) as err:
        world.sandbox.admin.inject_fault(404)  # type: ignore[arg-type]
    assert err.value.status == 422
    with pytest.raises(SandboxAdminError) as err:
        world.sandbox.admin.inject_fault(500, count=0)
    assert err.value.status == 422


def test_secondary_limit_named_only_in_the_message(world: World) -> None:
    """GitHub often answers a secondary limit with a 403 that has requests remaining and no
    `Retry-After`: only the message says what it is."""
    world.sandbox.admin.inject_fault(403, kind="secondary", method="POST")
    issue = world.sandbox.github(world.bot_token).get_repo(REPO).get_issue(1)
    with pytest.raises(GithubException) as err:
        issue.create_comment("queued")
    headers = {k.lower(): v for k, v in err.value.headers.items()}
    assert err.value.status == 403
    assert "secondary rate limit" in err.value.data["message"]
    assert "retry-after" not in headers and int(headers["x-ratelimit-remaining"]) > 0


def test_githubs_length_limits_answer_422(world: World) -> None:
    repo = world.sandbox.github(world.bot_token).get_repo(REPO)
    issue = repo.get_issue(1)
    assert len(issue.create_comment("x" * 65536).body) == 65536
    with pytest.raises(GithubException) as err:
        issue.create_comment("x" * 65537)
    assert err.value.status == 422 and "too long" in err.value.data["message"]
    commit = repo.get_commit(world.repo.feature_sha)
    assert commit.create_status("pending", description="d" * 140).state == "pending"
    with pytest.raises(GithubException) as err:
        commit.create_status("pending", description="d" * 141)
    assert err.value.status == 422 and "description is too long" in err.value.data["message"]
