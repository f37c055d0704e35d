"""PyGithub, unchanged, against the sandbox under real uvicorn: repositories, pull requests,
comments, reactions, statuses, permissions, users and rate-limit headers."""

from __future__ import annotations

import pytest
from github import BadCredentialsException, GithubException, UnknownObjectException

from tests.sandbox.conftest import REPO, World, git


def test_repo_and_pull_request_read_as_github(world: World) -> None:
    gh = world.sandbox.github(world.bot_token)
    repo = gh.get_repo(REPO)
    assert repo.full_name == REPO
    assert repo.clone_url == str(world.repo.path)
    assert repo.default_branch == "main"
    assert repo.owner.login == "acme"

    pr = repo.get_pull(world.pr["number"])
    assert pr.number == 1
    assert pr.state == "open"
    assert pr.title == "Add op"
    assert pr.user.login == "alice"
    assert pr.head.sha == world.repo.feature_sha
    assert pr.head.ref == "feature"
    assert pr.base.ref == "main"
    assert pr.base.sha == world.repo.main_sha
    assert pr.base.repo.full_name == REPO
    assert pr.commits == 1

    issue = repo.get_issue(1)
    assert issue.pull_request is not None
    assert issue.pull_request.html_url.endswith("/acme/kernels/pull/1")
    with pytest.raises(UnknownObjectException):
        repo.get_pull(99)
    with pytest.raises(UnknownObjectException):
        gh.get_repo("acme/nope")


def test_pull_request_ref_is_written_to_the_git_repository(world: World) -> None:
    assert git(world.repo.path, "rev-parse", "refs/pull/1/head") == world.repo.feature_sha
    admin = world.sandbox.admin
    pr2 = admin.open_pull(REPO, head=world.repo.feature2_sha, user="alice")
    assert pr2["number"] == 2
    assert pr2["head"]["ref"] == "pr-2"
    assert pr2["head"]["sha"] == world.repo.feature2_sha
    assert git(world.repo.path, "rev-parse", "refs/pull/2/head") == world.repo.feature2_sha

    admin.push(REPO, 1, world.repo.feature2_sha)
    assert git(world.repo.path, "rev-parse", "refs/pull/1/head") == world.repo.feature2_sha
    pr = world.sandbox.github(world.bot_token).get_repo(REPO).get_pull(1)
    assert pr.head.sha == world.repo.feature2_sha
    assert pr.commits == 2


def test_comments_create_list_edit_delete(world: World) -> None:
    gh = world.sandbox.github(world.bot_token)
    issue = gh.get_repo(REPO).get_issue(1)
    world.sandbox.admin.comment(REPO, 1, "alice", "/test add:cpu")
    mine = issue.create_comment("queued, position 1")
    assert mine.user.login == "ondemand-bot"
    assert mine.user.type == "Bot"
    assert [c.body for c in issue.get_comments()] == ["/test add:cpu", "queued, position 1"]

    fetched = gh.get_repo(REPO).get_issue(1).get_comment(mine.id)
    fetched.edit("running on cpu")
    assert gh.get_repo(REPO).get_issue(1).get_comment(mine.id).body == "running on cpu"
    record = next(c for c in world.sandbox.admin.comments(REPO, 1) if c["id"] == mine.id)
    assert [h["body"] for h in record["history"]] == ["queued, position 1", "running on cpu"]
    assert record["user_type"] == "Bot"

    fetched.delete()
    with pytest.raises(UnknownObjectException):
        gh.get_repo(REPO).get_issue(1).get_comment(mine.id)
    assert [c.body for c in issue.get_comments()] == ["/test add:cpu"]


def test_only_the_author_or_a_writer_edits_a_comment(world: World) -> None:
    alice_comment = world.sandbox.admin.comment(REPO, 1, "alice", "hello")
    mallory = world.sandbox.github(world.sandbox.admin.create_token("mallory"))
    comment = mallory.get_repo(REPO).get_issue(1).get_comment(alice_comment["id"])
    with pytest.raises(GithubException) as err:
        comment.edit("pwned")
    assert err.value.status == 403
    assert world.sandbox.admin.comments(REPO, 1)[0]["body"] == "hello"


def test_comment_listing_paginates_like_github(world: World) -> None:
    for i in range(35):
        world.sandbox.admin.comment(REPO, 1, "alice", f"comment {i}")
    issue = world.sandbox.github(world.bot_token).get_repo(REPO).get_issue(1)
    comments = issue.get_comments()
    assert comments.totalCount == 35
    assert [c.body for c in comments] == [f"comment {i}" for i in range(35)]
    pages = [
        c["path"]
        for c in world.sandbox.admin.state()["api_calls"]
        if c["path"].endswith("/issues/1/comments")
    ]
    assert len(pages) >= 2  # the second page came through the Link header


def test_reactions(world: World) -> None:
    gh = world.sandbox.github(world.bot_token)
    posted = world.sandbox.admin.comment(REPO, 1, "alice", "/test add")
    comment = gh.get_repo(REPO).get_issue(1).get_comment(posted["id"])
    eyes = comment.create_reaction("eyes")
    assert eyes.content == "eyes"
    assert eyes.user.login == "ondemand-bot"
    again = comment.create_reaction("eyes")
    assert again.id == eyes.id
    comment.create_reaction("rocket")
    assert sorted(r.content for r in comment.get_reactions()) == ["eyes", "rocket"]
    with pytest.raises(GithubException) as err:
        comment.create_reaction("thumbs")
    assert err.value.status == 422
    record = world.sandbox.admin.comments(REPO, 1)[0]
    assert sorted(r["content"] for r in record["reactions"]) == ["eyes", "rocket"]
    comment.delete_reaction(eyes.id)
    assert [r.content for r in comment.get_reactions()] == ["rocket"]


def test_commit_statuses_and_combined_status(world: World) -> None:
    gh = world.sandbox.github(world.bot_token)
    repo = gh.get_repo(REPO)
    sha = world.repo.feature_sha
    commit = repo.get_commit(sha)
    assert commit.sha == sha
    assert commit.commit.message == "add op"
    assert commit.parents[0].sha == world.repo.main_sha

    commit.create_status("pending", "http://svc/jobs/1", "queued", "ondemand/add:cpu")
    commit.create_status("pending", "http://svc/jobs/2", "queued", "ondemand/add:nvidia")
    status = commit.create_status("success", "http://svc/jobs/1", "69 passed", "ondemand/add:cpu")
    assert status.state == "success"
    assert status.creator.login == "ondemand-bot"

    combined = repo.get_commit(sha).get_combined_status()
    assert combined.state == "pending"
    assert {s.context: s.state for s in combined.statuses} == {
        "ondemand/add:cpu": "success",
        "ondemand/add:nvidia": "pending",
    }
    commit.create_status("failure", description="2 failed", context="ondemand/add:nvidia")
    assert repo.get_commit("feature").get_combined_status().state == "failure"
    assert [s.state for s in commit.get_statuses()] == ["failure", "success", "pending", "pending"]

    with pytest.raises(GithubException) as err:
        commit.create_status("bogus")
    assert err.value.status == 422
    with pytest.raises(GithubException) as err:
        repo.get_commit("0" * 40)
    assert err.value.status == 422
    assert len(world.sandbox.admin.statuses(REPO, sha)) == 4


def test_collaborator_permissions(world: World) -> None:
    admin = world.sandbox.admin
    admin.create_user("maya")
    admin.set_permission(REPO, "maya", "maintain")
    repo = world.sandbox.github(world.bot_token).get_repo(REPO)
    assert repo.get_collaborator_permission("alice") == "write"
    assert repo.get_collaborator_permission("maya") == "write"  # GitHub's legacy mapping
    assert repo.get_collaborator_permission("mallory") == "read"
    perm = repo.get_collaborator_role_name("maya")
    assert perm == "maintain"
    admin.set_permission(REPO, "alice", "none")
    assert repo.get_collaborator_permission("alice") == "read"
    with pytest.raises(UnknownObjectException):
        repo.get_collaborator_permission("nobody")


def test_team_membership(world: World) -> None:
    world.sandbox.admin.create_team("acme", "kernel-maintainers", ["alice"])
    gh = world.sandbox.github(world.bot_token)
    team = gh.get_organization("acme").get_team_by_slug("kernel-maintainers")
    assert team.get_team_membership("alice").state == "active"
    with pytest.raises(UnknownObjectException):
        team.get_team_membership("mallory")


def test_authentication_and_rate_limit_headers(world: World) -> None:
    gh = world.sandbox.github(world.bot_token)
    assert gh.get_user().login == "ondemand-bot"
    limit = gh.get_rate_limit()
    assert limit.resources.core.limit == 5000
    assert 0 < limit.resources.core.remaining < 5000
    remaining, total = gh.rate_limiting
    assert total == 5000 and remaining < 5000

    with pytest.raises(BadCredentialsException):
        world.sandbox.github("not-a-token").get_repo(REPO)
    anonymous = world.sandbox.github()
    issue = anonymous.get_repo(REPO).get_issue(1)  # public reads need no token
    with pytest.raises(GithubException) as err:
        issue.create_comment("hi")
    assert err.value.status == 401
    assert world.sandbox.admin.comments(REPO, 1) == []
