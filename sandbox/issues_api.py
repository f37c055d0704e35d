"""GitHub's issues (create, edit, close, list by state and labels) and a commit's pull requests
(`commits/{sha}/pulls`), in GitHub's shapes, with the App's permission checks: writing an
issue needs *Issues: write*, listing them *Issues: read*, a commit's pull requests *Pull
requests: read* (reading a public repository needs none)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from sandbox import shapes
from sandbox.github_api import OptionalBody, _body_of, ctx, paginate, require, visible_repo
from sandbox.state import Pull, SandboxError

router = APIRouter()
Json = dict[str, Any]
MAX_TITLE_CHARS = 256
STATES = ("open", "closed")
STATE_REASONS = ("completed", "not_planned", "reopened")


def _title(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise SandboxError(422, 'Invalid request.\n\n"title" wasn\'t supplied.')
    if len(value) > MAX_TITLE_CHARS:
        raise SandboxError(
            422, f"Validation Failed: title is too long (maximum is {MAX_TITLE_CHARS})"
        )
    return value


def _labels(value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise SandboxError(422, "Validation Failed: labels must be a list of names")
    return list(dict.fromkeys(value))


def _changes(payload: Json) -> dict[str, Any]:
    """An edit's fields, checked as GitHub checks them."""
    changes: dict[str, Any] = {}
    if "title" in payload:
        changes["title"] = _title(payload["title"])
    if "body" in payload:
        changes["body"] = _body_of(payload) if payload["body"] else ""
    if "labels" in payload:
        changes["labels"] = _labels(payload["labels"])
    if "state" in payload:
        if payload["state"] not in STATES:
            raise SandboxError(422, "Validation Failed: state must be open or closed")
        changes["state"] = payload["state"]
    if payload.get("state_reason") is not None:
        if payload["state_reason"] not in STATE_REASONS:
            raise SandboxError(422, "Validation Failed: state_reason is not valid")
        changes["state_reason"] = payload["state_reason"]
    return changes


@router.post("/repos/{owner}/{name}/issues", status_code=201)
def create_issue(owner: str, name: str, request: Request, payload: OptionalBody = None) -> Json:
    c = ctx(request)
    login = c.require_user()
    data = payload or {}
    title = _title(data.get("title"))
    body = _body_of(data) if data.get("body") else ""
    labels = _labels(data.get("labels", []))
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, ("issues", "write"))
        issue = c.state.open_issue(repo, title=title, body=body, user=login)
        c.state.update_issue(issue, {"labels": labels})
        return shapes.issue_json(c.base, c.state, repo, issue)


@router.patch("/repos/{owner}/{name}/issues/{number:int}")
def update_issue(
    owner: str, name: str, number: int, request: Request, payload: OptionalBody = None
) -> Json:
    c = ctx(request)
    c.require_user()
    changes = _changes(payload or {})
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        issue = c.state.issue(repo, number)
        if issue.is_pull:
            require(c, repo, ("issues", "write"), ("pull_requests", "write"))
        else:
            require(c, repo, ("issues", "write"))
        c.state.update_issue(issue, changes)
        return shapes.issue_json(c.base, c.state, repo, issue)


def _listed(issue: Pull, state: str, labels: list[str]) -> bool:
    return state in ("all", issue.state) and all(label in issue.labels for label in labels)


@router.get("/repos/{owner}/{name}/issues")
def list_issues(owner: str, name: str, request: Request, response: Response) -> list[Json]:
    """Issues and pull requests (GitHub lists both here), newest first: `state` open (the
    default), closed or all; `labels` a comma-separated list each must carry."""
    c = ctx(request)
    state = request.query_params.get("state", "open")
    if state not in (*STATES, "all"):
        raise SandboxError(422, "Validation Failed: state must be open, closed or all")
    labels = [v for v in request.query_params.get("labels", "").split(",") if v]
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, ("issues", "read"))
        found = sorted(
            (
                p
                for (full, _), p in c.state.pulls.items()
                if full == repo.full_name and _listed(p, state, labels)
            ),
            key=lambda p: -p.number,
        )
        items = [shapes.issue_json(c.base, c.state, repo, p) for p in found]
    return paginate(request, items, response)


@router.get("/repos/{owner}/{name}/commits/{sha}/pulls")
def commit_pulls(
    owner: str, name: str, sha: str, request: Request, response: Response
) -> list[Json]:
    """The pull requests a commit belongs to: the one whose merge made it, and those it
    heads."""
    c = ctx(request)
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, ("pull_requests", "read"))
        pulls = c.state.pulls_for_commit(repo, sha)
        items = [shapes.pull_json(c.base, c.state, repo, p) for p in pulls]
    return paginate(request, items, response)
