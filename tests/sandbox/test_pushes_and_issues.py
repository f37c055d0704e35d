"""What the sandbox does for the default branch's own runs, as GitHub does: a `git push` over
smart HTTP by a writer is delivered as `push` for each branch it moved (and `synchronize` for
the pull request a branch heads), a reader's push is refused; the admin API's merge makes a
merge commit on the base branch, closes the pull request as merged by it and delivers
`closed` then `push`; `commits/{sha}/pulls` finds the pull request a merge commit came from;
issues are created, edited, listed by state and labels and closed through PyGithub, and an App
installation without *Issues: write* is refused."""

from __future__ import annotations

import subprocess
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from github import Auth, GithubException, GithubIntegration

from tests.sandbox.conftest import REPO, SECRET, Receiver, World, git
from tests.support.keys import rsa_keypair

APP_ID = 4646


def _push_url(world: World, token: str) -> str:
    parts = urlsplit(world.sandbox.url)
    return f"{parts.scheme}://x-access-token:{token}@{parts.netloc}/{REPO}.git"


def _clone(world: World, tmp_path: Path) -> Path:
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", str(world.repo.path), str(clone))
    git(clone, "config", "user.email", "alice@example.com")
    git(clone, "config", "user.name", "alice")
    return clone


def test_a_push_over_http_is_delivered_as_push_and_synchronize(
    world: World, receiver: Receiver, tmp_path: Path
) -> None:
    admin = world.sandbox.admin
    admin.set_webhook(receiver.url, SECRET)
    clone = _clone(world, tmp_path)
    (clone / "NOTES.md").write_text("notes\n")
    git(clone, "add", "NOTES.md")
    git(clone, "commit", "-q", "-m", "notes")
    new_main = git(clone, "rev-parse", "HEAD")
    git(clone, "checkout", "-q", "feature")
    (clone / "op.py").write_text("def op():\n    return 3\n")
    git(clone, "commit", "-q", "-am", "op three")
    new_feature = git(clone, "rev-parse", "HEAD")

    refused = subprocess.run(
        ["git", "-C", str(clone), "push", "-q", _push_url(world, admin.create_token("mallory")),
         "main"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert refused.returncode != 0 and "403" in refused.stderr  # a reader may not push
    assert git(world.repo.path, "rev-parse", "main") == world.repo.main_sha

    alice = admin.create_token("alice")
    git(clone, "push", "-q", _push_url(world, alice), "main", "feature")
    assert git(world.repo.path, "rev-parse", "main") == new_main
    got = receiver.wait(3)
    pushes = {r.payload["ref"]: r for r in got if r.event == "push"}
    main = pushes["refs/heads/main"].payload
    assert (main["before"], main["after"]) == (world.repo.main_sha, new_main)
    assert not main["created"] and not main["deleted"] and not main["forced"]
    assert [c["id"] for c in main["commits"]] == [new_main]
    assert main["commits"][0]["added"] == ["NOTES.md"]
    assert main["head_commit"]["message"] == "notes"
    assert main["pusher"]["name"] == "alice" and main["sender"]["login"] == "alice"
    assert main["repository"]["full_name"] == REPO
    assert pushes["refs/heads/feature"].payload["after"] == new_feature
    (sync,) = [r.payload for r in got if r.event == "pull_request"]
    assert sync["action"] == "synchronize" and sync["after"] == new_feature
    assert sync["before"] == world.repo.feature_sha
    assert git(world.repo.path, "rev-parse", "refs/pull/1/head") == new_feature
    assert all(r.signature_ok for r in got)


def test_a_merge_moves_the_base_and_links_its_commit_to_the_pull_request(
    world: World, receiver: Receiver
) -> None:
    admin = world.sandbox.admin
    admin.set_webhook(receiver.url, SECRET)
    installed = admin.register_app(APP_ID + 1, rsa_keypair()[1], account="acme")
    merged = admin.merge_pull(REPO, 1, user="alice")
    sha = merged["sha"]
    assert git(world.repo.path, "rev-parse", "main") == sha
    assert git(world.repo.path, "rev-parse", f"{sha}^1") == world.repo.main_sha
    assert git(world.repo.path, "rev-parse", f"{sha}^2") == world.repo.feature_sha
    assert merged["pull"]["merged"] and merged["pull"]["merge_commit_sha"] == sha
    closed, push = receiver.wait(2)
    assert (closed.event, closed.payload["action"]) == ("pull_request", "closed")
    assert closed.payload["pull_request"]["merged"] is True
    assert (push.event, push.payload["ref"], push.payload["after"]) == (
        "push", "refs/heads/main", sha,
    )  # fmt: skip
    assert push.payload["before"] == world.repo.main_sha
    assert push.payload["installation"]["id"] == installed["installation_id"]

    gh = world.sandbox.github(world.bot_token)
    repo = gh.get_repo(REPO)
    (pull,) = repo.get_commit(sha).get_pulls()
    assert pull.number == 1 and pull.merged and pull.merge_commit_sha == sha
    assert [p.number for p in repo.get_commit(world.repo.main_sha).get_pulls()] == []
    with pytest.raises(Exception):  # noqa: B017 - a closed pull request merges no more
        admin.merge_pull(REPO, 1)


def test_issues_are_made_edited_listed_and_closed(world: World) -> None:
    gh = world.sandbox.github(world.bot_token)
    repo = gh.get_repo(REPO)
    issue = repo.create_issue(
        "gelu got slower on nvidia", body="<!-- m -->\nfirst", labels=["perf"]
    )
    other = repo.create_issue("unrelated")
    assert issue.number == 2 and issue.state == "open"  # PR #1 holds the first number
    assert [label.name for label in issue.labels] == ["perf"]
    issue.edit(body="<!-- m -->\nsecond")
    listed = repo.get_issues(state="open", labels=["perf"])
    assert [(i.number, i.body) for i in listed] == [(issue.number, "<!-- m -->\nsecond")]
    assert {i.number for i in repo.get_issues(state="open")} == {1, issue.number, other.number}
    issue.edit(state="closed")
    assert [i.number for i in repo.get_issues(state="closed")] == [issue.number]
    closed = repo.get_issue(issue.number)
    assert closed.state == "closed" and closed.closed_at is not None
    assert closed.state_reason == "completed"
    back = world.sandbox.admin.issues(REPO)
    assert [(i["number"], i["state"]) for i in back] == [(2, "closed"), (3, "open")]


def test_issues_need_their_permission_as_an_app(world: World) -> None:
    private, public = rsa_keypair()
    admin = world.sandbox.admin
    installation = int(admin.register_app(APP_ID, public, account="acme")["installation_id"])
    app = GithubIntegration(auth=Auth.AppAuth(APP_ID, private), base_url=world.sandbox.url)
    everything = app.get_app_installation(installation).permissions
    admin.set_installation_permissions(
        installation, {k: v for k, v in everything.items() if k != "issues"} | {"issues": "read"}
    )
    token = app.get_access_token(installation).token
    repo = world.sandbox.github(token).get_repo(REPO)
    with pytest.raises(GithubException) as err:
        repo.create_issue("a regression")
    assert err.value.status == 403
    assert err.value.headers["x-accepted-github-permissions"] == "issues=write"
    assert [i.number for i in repo.get_issues(state="all")] == [1]  # reading needs read
