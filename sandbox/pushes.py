"""Pushes as GitHub tells of them: a `push` delivery for every branch a push moved (by git over
smart HTTP, or by a merge the admin API makes), with GitHub's payload (ref, before, after,
created, deleted, forced, commits, head_commit, pusher, repository, sender, installation),
and `pull_request` `synchronize` for each open pull request whose head branch moved."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sandbox import git
from sandbox.git import ZERO_SHA, CommitInfo
from sandbox.state import Repo, SandboxState
from sandbox.webhooks import Deliverer, _envelope, pull_request_payload

Json = dict[str, Any]


def _commit(base: str, repo: Repo, info: CommitInfo, paths: Mapping[str, list[str]]) -> Json:
    """One commit as a push event lists it."""
    return {
        "id": info.sha,
        "tree_id": info.tree,
        "distinct": True,
        "message": info.message,
        "timestamp": info.committer_date,
        "url": f"{base}/{repo.full_name}/commit/{info.sha}",
        "author": {"name": info.author_name, "email": info.author_email},
        "committer": {"name": info.committer_name, "email": info.committer_email},
        "added": list(paths.get("added", [])),
        "removed": list(paths.get("removed", [])),
        "modified": list(paths.get("modified", [])),
    }


def push_payload(
    base: str, state: SandboxState, repo: Repo, ref: str, before: str, after: str, sender: str
) -> Json:
    """The `push` event of `ref` moving from `before` to `after` (all zeros: created or
    deleted), `sender` pushing."""
    deleted = after == ZERO_SHA
    commits = [] if deleted else git.commits_between(repo.git_path, before, after)
    listed = [_commit(base, repo, c, git.commit_paths(repo.git_path, c)) for c in commits]
    forced = False
    if before != ZERO_SHA and not deleted:
        forced = git.count_commits(repo.git_path, after, before) > 0  # `before` left behind
    user = state.users[sender]
    data: Json = {
        "ref": ref,
        "before": before,
        "after": after,
        "created": before == ZERO_SHA,
        "deleted": deleted,
        "forced": forced,
        "base_ref": None,
        "compare": f"{base}/{repo.full_name}/compare/{before[:12]}...{after[:12]}",
        "commits": listed,
        "head_commit": listed[-1] if listed else None,
        "pusher": {"name": user.login, "email": f"{user.login}@users.noreply.sandbox"},
    }
    data.update(_envelope(base, state, repo, sender))
    return data


def emit_push(
    deliverer: Deliverer, base: str, repo: Repo, branch: str, before: str, after: str, sender: str
) -> None:
    """Deliver `push` for `branch` moving from `before` to `after`."""
    with deliverer.state.lock:
        payload = push_payload(
            base, deliverer.state, repo, f"refs/heads/{branch}", before, after, sender
        )
        deliverer.emit("push", payload, repo=repo)


def emit_moves(
    deliverer: Deliverer,
    base: str,
    repo: Repo,
    old: Mapping[str, str],
    new: Mapping[str, str],
    sender: str,
) -> list[str]:
    """What GitHub delivers after a push moved branches from `old` to `new` heads: `push` for
    each moved branch, then `pull_request` `synchronize` for each open pull request whose
    head branch moved (its head follows it). Returns the branches moved."""
    state = deliverer.state
    moved = sorted(b for b in {*old, *new} if old.get(b) != new.get(b))
    for branch in moved:
        emit_push(deliverer, base, repo, branch, old.get(branch, ZERO_SHA),
                  new.get(branch, ZERO_SHA), sender)  # fmt: skip
    for branch in moved:
        head = new.get(branch)
        if head is None:
            continue
        with state.lock:
            pulls = [
                p
                for (name, _), p in state.pulls.items()
                if name == repo.full_name and p.is_pull and p.state == "open"
                and p.head_ref == branch and p.head_sha != head
            ]  # fmt: skip
        for pull in pulls:
            commits = git.count_commits(repo.git_path, pull.base_sha, head)
            with state.lock:
                before = state.push_pull(pull, head, commits)
            git.update_ref(repo.git_path, f"refs/pull/{pull.number}/head", head)
            with state.lock:
                payload = pull_request_payload(
                    base, state, repo, pull, "synchronize", sender, before=before
                )
                deliverer.emit("pull_request", payload, repo=repo)
    return moved
