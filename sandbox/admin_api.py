"""The admin API under /_sandbox/: set the world up (users, tokens, Apps, repositories backed by
local git repositories, permissions, teams), act as people (open and push to pull requests,
comment, edit, delete), configure the webhook, inject faults, and read everything back."""

from __future__ import annotations

import json
from typing import Any, Literal

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, Field

from sandbox import git, shapes
from sandbox.github_api import emit_comment_event
from sandbox.state import (
    Comment,
    Delivery,
    Fault,
    Pull,
    Repo,
    SandboxError,
    SandboxState,
)
from sandbox.webhooks import (
    Deliverer,
    installation_payload,
    merge_group_payload,
    pull_request_payload,
)

router = APIRouter(prefix="/_sandbox")
Json = dict[str, Any]


class UserIn(BaseModel):
    login: str = Field(min_length=1, max_length=100)
    type: Literal["User", "Bot", "Organization"] = "User"


class TokenIn(BaseModel):
    login: str
    token: str | None = Field(default=None, min_length=8, max_length=200)


class AppIn(BaseModel):
    app_id: int = Field(gt=0)
    public_key_pem: str
    slug: str = Field(default="ondemand", pattern=r"^[a-z0-9][a-z0-9-]*$")
    name: str | None = None
    owner: str | None = None
    installation_id: int | None = Field(default=None, gt=0)
    account: str | None = None


class InstallationIn(BaseModel):
    account: str | None = None
    installation_id: int | None = Field(default=None, gt=0)


class InstallationPermissionsIn(BaseModel):
    permissions: dict[str, Literal["read", "write", "admin"]]
    user: str | None = None  # who accepted them (the `sender`); default: the account


class RepoIn(BaseModel):
    owner: str = Field(min_length=1)
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    git_path: str
    default_branch: str = "main"
    private: bool = False


class PermissionIn(BaseModel):
    login: str
    permission: Literal["none", "read", "triage", "write", "maintain", "admin"]


class TeamIn(BaseModel):
    org: str
    slug: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    members: list[str] = []
    maintainers: list[str] = []


class PullIn(BaseModel):
    head: str = Field(min_length=1)
    base: str | None = None
    title: str = "Sandbox pull request"
    body: str = ""
    user: str


class IssueIn(BaseModel):
    title: str = "Sandbox issue"
    body: str = ""
    user: str


class PushIn(BaseModel):
    sha: str = Field(min_length=1)
    user: str | None = None


class CloseIn(BaseModel):
    user: str | None = None
    merged: bool = False


class CommentIn(BaseModel):
    user: str
    body: str = Field(min_length=1)


class EditIn(BaseModel):
    body: str = Field(min_length=1)
    user: str | None = None


class WebhookIn(BaseModel):
    url: str | None = None
    secret: str | None = None
    content_type: Literal["json", "form"] = "json"


class FaultIn(BaseModel):
    status: Literal[403, 429, 500, 502, 503]
    count: int = Field(default=1, ge=1)
    path_prefix: str | None = None
    retry_after: int | None = Field(default=None, ge=0)
    method: str | None = None
    kind: Literal["primary", "secondary"] = "primary"
    applied: bool = False  # carry the request out, then answer the fault


class RateLimitIn(BaseModel):
    limit: int = Field(ge=1)
    enforced: bool = True


class ReleaseIn(BaseModel):
    order: Literal["as-sent", "reversed"] = "as-sent"
    duplicate: bool = False


def _parts(request: Request) -> tuple[SandboxState, Deliverer, str]:
    return (
        request.app.state.sandbox,
        request.app.state.deliverer,
        str(request.base_url).rstrip("/"),
    )


# -- the world --------------------------------------------------------------------------------


@router.post("/users", status_code=201)
def create_user(spec: UserIn, request: Request) -> Json:
    state, _, _ = _parts(request)
    user = state.add_user(spec.login, spec.type)
    return {"id": user.id, "login": user.login, "type": user.type}


@router.post("/tokens", status_code=201)
def create_token(spec: TokenIn, request: Request) -> Json:
    state, _, _ = _parts(request)
    grant = state.add_token(spec.login, spec.token)
    return {"token": grant.token, "login": grant.login}


@router.post("/apps", status_code=201)
def create_app_(spec: AppIn, request: Request) -> Json:
    state, _, _ = _parts(request)
    with state.lock:
        app = state.add_app(spec.app_id, spec.public_key_pem, spec.slug, spec.name, spec.owner)
        inst = state.add_installation(app.id, spec.account, spec.installation_id)
    return {
        "app_id": app.id,
        "slug": app.slug,
        "bot_login": app.bot_login,
        "installation_id": inst.id,
    }


@router.post("/apps/{app_id}/installations", status_code=201)
def create_installation(app_id: int, spec: InstallationIn, request: Request) -> Json:
    state, _, _ = _parts(request)
    inst = state.add_installation(app_id, spec.account, spec.installation_id)
    return {"app_id": app_id, "installation_id": inst.id, "account": inst.account}


@router.post("/installations/{installation_id}/permissions")
def set_installation_permissions(
    installation_id: int, spec: InstallationPermissionsIn, request: Request
) -> Json:
    """Replace what an installation's owner accepted. When that grants anything new, GitHub's
    `installation` `new_permissions_accepted` is delivered (a permission taken away is not
    announced). Its tokens may from now on do no more than this."""
    state, deliverer, base = _parts(request)
    with state.lock:
        inst, more = state.set_installation_permissions(installation_id, spec.permissions)
        sender = spec.user or inst.account or state.apps[inst.app_id].owner
        state.user(sender)
        event = "new_permissions_accepted" if more else None
        if event is not None:
            payload = installation_payload(base, state, inst, event, sender)
            deliverer.emit("installation", payload)
        return {"installation_id": inst.id, "permissions": inst.permissions, "event": event}


@router.post("/repos", status_code=201)
def create_repo(spec: RepoIn, request: Request) -> Json:
    state, _, base = _parts(request)
    try:
        git.check_repository(spec.git_path)
    except git.GitError as exc:
        raise SandboxError(422, f"git_path: {exc}") from exc
    with state.lock:
        repo = state.add_repo(
            spec.owner, spec.name, spec.git_path, spec.default_branch, spec.private
        )
        return shapes.repo_json(base, state, repo)


@router.post("/repos/{owner}/{name}/collaborators")
def set_permission(owner: str, name: str, spec: PermissionIn, request: Request) -> Json:
    state, _, _ = _parts(request)
    with state.lock:
        repo = state.repo(owner, name)
        state.set_permission(repo, spec.login, spec.permission)
        return {"login": spec.login, "permission": spec.permission}


@router.post("/teams", status_code=201)
def create_team(spec: TeamIn, request: Request) -> Json:
    state, _, base = _parts(request)
    members = {login: "member" for login in spec.members}
    members.update({login: "maintainer" for login in spec.maintainers})
    with state.lock:
        return shapes.team_json(base, state, state.add_team(spec.org, spec.slug, members))


# -- acting as people -----------------------------------------------------------------------


def _resolve(repo: Repo, rev: str) -> str:
    try:
        return git.resolve(repo.git_path, rev)
    except git.GitError as exc:
        raise SandboxError(422, f"{rev!r} is not a commit in {repo.git_path}") from exc


def _set_pull_ref(repo: Repo, number: int, sha: str) -> None:
    try:
        git.update_ref(repo.git_path, f"refs/pull/{number}/head", sha)
    except git.GitError as exc:
        raise SandboxError(500, f"could not write refs/pull/{number}/head: {exc}") from exc


def _emit_pull(
    deliverer: Deliverer, base: str, repo: Repo, pull: Pull, action: str, sender: str, **kw: Any
) -> None:
    payload = pull_request_payload(base, deliverer.state, repo, pull, action, sender, **kw)
    deliverer.emit("pull_request", payload, repo=repo)


@router.post("/repos/{owner}/{name}/pulls", status_code=201)
def open_pull(owner: str, name: str, spec: PullIn, request: Request) -> Json:
    state, deliverer, base = _parts(request)
    repo = state.repo(owner, name)
    base_ref = spec.base or repo.default_branch
    if not git.is_branch(repo.git_path, base_ref):
        raise SandboxError(422, f"base {base_ref!r} is not a branch of {repo.full_name}")
    head_sha = _resolve(repo, spec.head)
    base_sha = _resolve(repo, base_ref)
    head_is_branch = git.is_branch(repo.git_path, spec.head)
    commits = git.count_commits(repo.git_path, base_sha, head_sha)
    with state.lock:
        state.user(spec.user)
        pull = state.open_pull(
            repo,
            title=spec.title,
            body=spec.body,
            user=spec.user,
            head_ref=spec.head if head_is_branch else "",
            head_sha=head_sha,
            base_ref=base_ref,
            base_sha=base_sha,
            commits=commits,
        )
        if not head_is_branch:
            pull.head_ref = f"pr-{pull.number}"
    _set_pull_ref(repo, pull.number, head_sha)
    with state.lock:
        _emit_pull(deliverer, base, repo, pull, "opened", spec.user)
        return shapes.pull_json(base, state, repo, pull)


@router.post("/repos/{owner}/{name}/issues", status_code=201)
def open_issue(owner: str, name: str, spec: IssueIn, request: Request) -> Json:
    """A plain issue (no pull request); nothing is delivered for it."""
    state, _, base = _parts(request)
    with state.lock:
        repo = state.repo(owner, name)
        issue = state.open_issue(repo, title=spec.title, body=spec.body, user=spec.user)
        return shapes.issue_json(base, state, repo, issue)


@router.post("/repos/{owner}/{name}/pulls/{number:int}/push")
def push_pull(owner: str, name: str, number: int, spec: PushIn, request: Request) -> Json:
    state, deliverer, base = _parts(request)
    repo = state.repo(owner, name)
    pull = state.pull(repo, number)
    sha = _resolve(repo, spec.sha)
    commits = git.count_commits(repo.git_path, pull.base_sha, sha)
    with state.lock:
        sender = spec.user or pull.user
        state.user(sender)
        before = state.push_pull(pull, sha, commits)
    _set_pull_ref(repo, number, sha)
    with state.lock:
        _emit_pull(deliverer, base, repo, pull, "synchronize", sender, before=before)
        return shapes.pull_json(base, state, repo, pull)


@router.post("/repos/{owner}/{name}/pulls/{number:int}/merge-queue", status_code=201)
def queue_pull(owner: str, name: str, number: int, spec: CloseIn, request: Request) -> Json:
    """Add the pull request to the base branch's merge queue, as GitHub does: a merge commit
    of its head onto the base's tip on a branch of its own
    (`gh-readonly-queue/<base>/pr-<n>-<base sha>`), then `merge_group` `checks_requested`."""
    state, deliverer, base = _parts(request)
    repo = state.repo(owner, name)
    pull = state.pull(repo, number)
    base_sha = _resolve(repo, pull.base_ref)
    message = f"Merge pull request #{number} into {pull.base_ref} (merge queue)"
    try:
        head_sha = git.merge_commit(repo.git_path, base_sha, pull.head_sha, message)
        branch = f"gh-readonly-queue/{pull.base_ref}/pr-{number}-{base_sha}"
        git.update_ref(repo.git_path, f"refs/heads/{branch}", head_sha)
    except git.GitError as exc:
        raise SandboxError(422, f"#{number} cannot be merged onto {pull.base_ref}: {exc}") from exc
    group = {
        "head_sha": head_sha,
        "head_ref": f"refs/heads/{branch}",
        "base_sha": base_sha,
        "base_ref": f"refs/heads/{pull.base_ref}",
        "head_commit": {"id": head_sha, "tree_id": git.commit_info(repo.git_path, head_sha).tree,
                        "message": message},
    }  # fmt: skip
    with state.lock:
        sender = spec.user or pull.user
        state.user(sender)
        payload = merge_group_payload(base, state, repo, group, "checks_requested", sender)
        deliverer.emit("merge_group", payload, repo=repo)
    return group


class DequeueIn(BaseModel):
    head_sha: str = Field(min_length=7, max_length=64)
    reason: Literal["merged", "invalidated", "dequeued"] = "dequeued"
    user: str | None = None


@router.post("/repos/{owner}/{name}/pulls/{number:int}/merge-queue/destroy")
def destroy_group(owner: str, name: str, number: int, spec: DequeueIn, request: Request) -> Json:
    """The pull request's merge group `head_sha` is gone (merged, invalidated by a change ahead
    of it, or dequeued), as GitHub tells with `merge_group` `destroyed`."""
    state, deliverer, base = _parts(request)
    repo = state.repo(owner, name)
    pull = state.pull(repo, number)
    base_sha = _resolve(repo, pull.base_ref)
    branch = f"gh-readonly-queue/{pull.base_ref}/pr-{number}-{base_sha}"
    group = {
        "head_sha": spec.head_sha,
        "head_ref": f"refs/heads/{branch}",
        "base_sha": base_sha,
        "base_ref": f"refs/heads/{pull.base_ref}",
    }
    with state.lock:
        sender = spec.user or pull.user
        state.user(sender)
        payload = merge_group_payload(base, state, repo, group, "destroyed", sender)
        payload["reason"] = spec.reason
        deliverer.emit("merge_group", payload, repo=repo)
    return group


@router.post("/repos/{owner}/{name}/pulls/{number:int}/close")
def close_pull(owner: str, name: str, number: int, spec: CloseIn, request: Request) -> Json:
    state, deliverer, base = _parts(request)
    with state.lock:
        repo = state.repo(owner, name)
        pull = state.pull(repo, number)
        sender = spec.user or pull.user
        state.user(sender)
        state.close_pull(pull, spec.merged)
        _emit_pull(deliverer, base, repo, pull, "closed", sender)
        return shapes.pull_json(base, state, repo, pull)


@router.post("/repos/{owner}/{name}/issues/{number:int}/comments", status_code=201)
def post_comment(owner: str, name: str, number: int, spec: CommentIn, request: Request) -> Json:
    state, deliverer, base = _parts(request)
    with state.lock:
        repo = state.repo(owner, name)
        pull = state.issue(repo, number)
        comment = state.add_comment(pull, spec.user, spec.body)
        emit_comment_event(deliverer, base, repo, pull, comment, "created", spec.user)
        return shapes.comment_json(base, state, repo, comment)


@router.patch("/repos/{owner}/{name}/issues/comments/{comment_id:int}")
def edit_comment(owner: str, name: str, comment_id: int, spec: EditIn, request: Request) -> Json:
    state, deliverer, base = _parts(request)
    with state.lock:
        repo = state.repo(owner, name)
        comment = state.comment(repo, comment_id)
        sender = spec.user or comment.user
        state.user(sender)
        old = state.edit_comment(comment, spec.body, sender)
        pull = state.issue(repo, comment.issue_number)
        emit_comment_event(deliverer, base, repo, pull, comment, "edited", sender, old)
        return shapes.comment_json(base, state, repo, comment)


@router.delete("/repos/{owner}/{name}/issues/comments/{comment_id:int}", status_code=204)
def delete_comment(
    owner: str, name: str, comment_id: int, request: Request, user: str | None = None
) -> Response:
    state, deliverer, base = _parts(request)
    with state.lock:
        repo = state.repo(owner, name)
        comment = state.comment(repo, comment_id)
        sender = user or comment.user
        state.user(sender)
        state.delete_comment(comment)
        pull = state.issue(repo, comment.issue_number)
        emit_comment_event(deliverer, base, repo, pull, comment, "deleted", sender)
    return Response(status_code=204)


# -- webhook, deliveries, faults --------------------------------------------------------------


@router.put("/webhook")
@router.post("/webhook")
def set_webhook(spec: WebhookIn, request: Request) -> Json:
    state, _, _ = _parts(request)
    state.set_webhook(spec.url, spec.secret, spec.content_type)
    return webhook_json(state)


@router.get("/webhook")
def get_webhook(request: Request) -> Json:
    return webhook_json(_parts(request)[0])


def webhook_json(state: SandboxState) -> Json:
    hook = state.webhook
    return {
        "url": hook.url if hook else None,
        "has_secret": bool(hook and hook.secret),
        "content_type": hook.content_type if hook else None,
    }


def delivery_json(d: Delivery) -> Json:
    return {
        "id": d.id,
        "event": d.event,
        "action": d.action,
        "url": d.url,
        "created_at": shapes.ts(d.created_at),
        "status_code": d.status_code,
        "attempts": [
            {
                "at": shapes.ts(a.at),
                "status_code": a.status_code,
                "error": a.error,
                "duration_ms": a.duration_ms,
            }
            for a in d.attempts
        ],
        "headers": d.headers,
        "payload": json.loads(d.body),
    }


@router.post("/deliveries/hold", status_code=204)
def hold_deliveries(request: Request) -> Response:
    """Keep new deliveries back (recorded, not sent) until released: to send them late, out of
    order or twice, as GitHub may."""
    _parts(request)[1].hold()
    return Response(status_code=204)


@router.post("/deliveries/release")
def release_deliveries(spec: ReleaseIn, request: Request) -> list[str]:
    """Send the held deliveries, in the order they were made or reversed, each once or twice."""
    return _parts(request)[1].release(reverse=spec.order == "reversed", duplicate=spec.duplicate)


@router.get("/deliveries")
def list_deliveries(request: Request) -> list[Json]:
    state, _, _ = _parts(request)
    with state.lock:
        return [delivery_json(d) for d in state.deliveries.values()]


@router.get("/deliveries/{delivery_id}")
def get_delivery(delivery_id: str, request: Request) -> Json:
    state, _, _ = _parts(request)
    with state.lock:
        return delivery_json(state.delivery(delivery_id))


@router.post("/deliveries/{delivery_id}/redeliver", status_code=202)
def redeliver(delivery_id: str, request: Request) -> Json:
    state, deliverer, _ = _parts(request)
    delivery = deliverer.redeliver(delivery_id)
    with state.lock:
        return delivery_json(delivery)


@router.post("/faults", status_code=201)
def add_fault(spec: FaultIn, request: Request) -> Json:
    state, _, _ = _parts(request)
    fault = state.add_fault(
        spec.status,
        spec.count,
        spec.path_prefix,
        spec.retry_after,
        spec.method,
        spec.kind,
        spec.applied,
    )
    return fault_json(fault)


@router.put("/rate-limit")
def set_rate_limit(spec: RateLimitIn, request: Request) -> Json:
    """Each login's calls an hour; `enforced`: refused past it with GitHub's 403 (otherwise
    only reported in the headers, and refused only by injected faults)."""
    state, _, _ = _parts(request)
    with state.lock:
        state.rate_limit, state.rate_enforced = spec.limit, spec.enforced
        return {"limit": state.rate_limit, "enforced": state.rate_enforced,
                "reset": state.rate_reset}  # fmt: skip


@router.get("/faults")
def list_faults(request: Request) -> list[Json]:
    state, _, _ = _parts(request)
    with state.lock:
        return [fault_json(f) for f in state.faults.values()]


@router.delete("/faults", status_code=204)
def clear_faults(request: Request) -> Response:
    _parts(request)[0].clear_faults()
    return Response(status_code=204)


def fault_json(fault: Fault) -> Json:
    return {
        "id": fault.id,
        "status": fault.status,
        "remaining": fault.remaining,
        "path_prefix": fault.path_prefix,
        "retry_after": fault.retry_after,
        "method": fault.method,
        "kind": fault.kind,
        "applied": fault.applied,
    }


# -- reading it back --------------------------------------------------------------------------


def comment_record(state: SandboxState, c: Comment) -> Json:
    return {
        "id": c.id,
        "repo": c.repo,
        "issue_number": c.issue_number,
        "user": c.user,
        "user_type": state.users[c.user].type,
        "body": c.body,
        "deleted": c.deleted,
        "created_at": shapes.ts(c.created_at),
        "updated_at": shapes.ts(c.updated_at),
        "history": [{"body": r.body, "at": shapes.ts(r.at), "by": r.by} for r in c.history],
        "reactions": [
            {"id": r.id, "user": r.user, "content": r.content} for r in state.reactions_on(c.id)
        ],
    }


def snapshot(state: SandboxState) -> Json:
    """Everything, as plain JSON, for assertions."""
    with state.lock:
        return {
            "version": state.version,
            "users": [{"id": u.id, "login": u.login, "type": u.type} for u in state.users.values()],
            "repos": [
                {
                    "full_name": r.full_name,
                    "git_path": r.git_path,
                    "default_branch": r.default_branch,
                    "private": r.private,
                    "collaborators": dict(r.collaborators),
                }
                for r in state.repos.values()
            ],
            "pulls": [
                {
                    "repo": p.repo,
                    "number": p.number,
                    "title": p.title,
                    "user": p.user,
                    "state": p.state,
                    "merged": p.merged,
                    "head_ref": p.head_ref,
                    "head_sha": p.head_sha,
                    "base_ref": p.base_ref,
                    "base_sha": p.base_sha,
                }
                for p in state.pulls.values()
                if p.is_pull
            ],
            "issues": [
                {"repo": i.repo, "number": i.number, "title": i.title, "user": i.user}
                for i in state.pulls.values()
                if not i.is_pull
            ],
            "comments": [comment_record(state, c) for c in state.comments.values()],
            "statuses": [
                {
                    "id": s.id,
                    "repo": s.repo,
                    "sha": s.sha,
                    "state": s.state,
                    "context": s.context,
                    "description": s.description,
                    "target_url": s.target_url,
                    "creator": s.creator,
                    "created_at": shapes.ts(s.created_at),
                }
                for s in state.statuses
            ],
            "check_runs": [
                {
                    "id": run.id,
                    "repo": run.repo,
                    "head_sha": run.head_sha,
                    "name": run.name,
                    "external_id": run.external_id,
                    "status": run.status,
                    "conclusion": run.conclusion,
                    "title": run.output.get("title") or "",
                    "updates": run.updates,
                }
                for run in state.check_runs.values()
            ],
            "deliveries": [delivery_json(d) for d in state.deliveries.values()],
            "faults": [fault_json(f) for f in state.faults.values()],
            "webhook": webhook_json(state),
            "apps": [
                {"app_id": a.id, "slug": a.slug, "bot_login": a.bot_login}
                for a in state.apps.values()
            ],
            "installations": [
                {
                    "id": i.id,
                    "app_id": i.app_id,
                    "account": i.account,
                    "permissions": dict(i.permissions),
                }
                for i in state.installations.values()
            ],
            "api_calls": [
                {
                    "at": shapes.ts(call.at),
                    "method": call.method,
                    "path": call.path,
                    "status": call.status,
                    "login": call.login,
                }
                for call in state.api_calls
            ],
        }


@router.get("/state")
def get_state(request: Request) -> Json:
    return snapshot(_parts(request)[0])


@router.get("/wait")
def wait(
    request: Request,
    response: Response,
    what: Literal["comment", "status", "deliveries", "reaction", "change"] = Query(alias="for"),
    repo: str | None = None,
    number: int | None = None,
    user: str | None = None,
    contains: str | None = None,
    sha: str | None = None,
    context: str | None = None,
    state_: str | None = Query(default=None, alias="state"),
    comment_id: int | None = None,
    content: str | None = None,
    count: int = Query(default=1, ge=1),
    since: int = 0,
    timeout: float = Query(default=10.0, ge=0, le=120),
) -> Json:
    """Block until a condition holds (or `timeout`, answering 408):
    `for=comment` (repo, number, user, contains; `count` such comments, updated bodies count),
    `for=status` (repo, sha, context, state), `for=reaction` (comment_id, user, content),
    `for=deliveries` (`count` deliveries recorded, every one attempted, none queued),
    `for=change` (state version above `since`)."""
    state, deliverer, _ = _parts(request)

    def comments() -> list[Json]:
        found = [
            comment_record(state, c)
            for c in state.comments.values()
            if not c.deleted
            and (repo is None or c.repo == repo)
            and (number is None or c.issue_number == number)
            and (user is None or c.user == user)
            and (contains is None or contains in c.body)
        ]
        return found if len(found) >= count else []

    def statuses() -> list[Json]:
        found = [
            {"id": s.id, "sha": s.sha, "state": s.state, "context": s.context, "repo": s.repo}
            for s in state.statuses
            if (repo is None or s.repo == repo)
            and (sha is None or s.sha == sha)
            and (context is None or s.context == context)
            and (state_ is None or s.state == state_)
        ]
        return found if len(found) >= count else []

    def reactions() -> list[Json]:
        found = [
            {"id": r.id, "comment_id": r.comment_id, "user": r.user, "content": r.content}
            for r in state.reactions.values()
            if (comment_id is None or r.comment_id == comment_id)
            and (user is None or r.user == user)
            and (content is None or r.content == content)
        ]
        return found if len(found) >= count else []

    def deliveries() -> list[Json]:
        found = list(state.deliveries.values())
        if len(found) < count or deliverer.pending or any(not d.attempts for d in found):
            return []
        return [delivery_json(d) for d in found]

    def changed() -> list[Json]:
        return [{"version": state.version}] if state.version > since else []

    predicate = {
        "comment": comments,
        "status": statuses,
        "reaction": reactions,
        "deliveries": deliveries,
        "change": changed,
    }[what]
    found = state.wait_for(predicate, timeout)
    if not found:
        response.status_code = 408
    return {"ok": bool(found), "items": found, "version": state.version}
