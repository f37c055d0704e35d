"""The admin API's merge of a pull request, as GitHub's merge button makes it: a merge commit
of the head onto the base branch's tip (`merge`), or the head's changes as one commit on it
(`squash`); the base branch moves to it, the pull request closes as merged with that commit as
its `merge_commit_sha`, and GitHub's deliveries follow: `pull_request` `closed`, then `push`
of the base branch. The admin API also reads issues back for assertions."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Request
from pydantic import BaseModel

from sandbox import git, shapes
from sandbox.admin_api import _emit_pull, _parts, _resolve
from sandbox.pushes import emit_push
from sandbox.state import SandboxError

router = APIRouter(prefix="/_sandbox")
Json = dict[str, Any]


class MergeIn(BaseModel):
    user: str | None = None
    method: Literal["merge", "squash"] = "merge"


def _merge_commit(git_path: str, base: str, head: str, message: str, squash: bool) -> str:
    if not squash:
        return git.merge_commit(git_path, base, head, message)
    merged = git.merge_commit(git_path, base, head, message)
    tree = git.commit_info(git_path, merged).tree
    return git.commit_tree(git_path, tree, base, message)


@router.post("/repos/{owner}/{name}/pulls/{number:int}/merge")
def merge_pull(owner: str, name: str, number: int, spec: MergeIn, request: Request) -> Json:
    state, deliverer, base = _parts(request)
    repo = state.repo(owner, name)
    pull = state.pull(repo, number)
    if pull.state != "open":
        raise SandboxError(405, "Pull Request is not mergeable")
    tip = _resolve(repo, pull.base_ref)
    message = f"Merge pull request #{number}\n\n{pull.title}"
    try:
        sha = _merge_commit(repo.git_path, tip, pull.head_sha, message, spec.method == "squash")
        git.move_branch(repo.git_path, pull.base_ref, sha)
    except git.GitError as exc:
        raise SandboxError(405, f"#{number} cannot be merged onto {pull.base_ref}: {exc}") from exc
    with state.lock:
        sender = spec.user or pull.user
        state.user(sender)
        state.merge_pull(pull, sha)
        _emit_pull(deliverer, base, repo, pull, "closed", sender)
    emit_push(deliverer, base, repo, pull.base_ref, tip, sha, sender)
    with state.lock:
        return {"sha": sha, "merged": True, "pull": shapes.pull_json(base, state, repo, pull)}


@router.get("/repos/{owner}/{name}/issues")
def list_issues(owner: str, name: str, request: Request) -> list[Json]:
    """Every plain issue of the repository (no pull requests), oldest first, with its labels,
    state and body."""
    state, _, base = _parts(request)
    with state.lock:
        repo = state.repo(owner, name)
        return [
            shapes.issue_json(base, state, repo, p)
            for (full, _), p in sorted(state.pulls.items(), key=lambda kv: kv[1].number)
            if full == repo.full_name and not p.is_pull
        ]
