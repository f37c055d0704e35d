"""The REST subset of GitHub's API that the service uses, in GitHub's JSON shapes."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Body, Request, Response
from fastapi.responses import JSONResponse

from sandbox import contents, git, shapes
from sandbox.auth import Caller, resolve
from sandbox.state import Comment, Pull, Repo, SandboxError, SandboxState, Team, grants, now
from sandbox.webhooks import (
    Deliverer,
    check_run_json,
    check_run_payload,
    issue_comment_payload,
)

router = APIRouter()
Json = dict[str, Any]
INSTALLATION_TOKEN_TTL = timedelta(hours=1)
OptionalBody = Annotated[dict[str, Any] | None, Body()]
NOT_ACCESSIBLE = "Resource not accessible by integration"
ACCEPTED_HEADER = "X-Accepted-GitHub-Permissions"
# What a call on a pull request's conversation needs: either permission will do.
CONVERSATION_READ = (("issues", "read"), ("pull_requests", "read"))
CONVERSATION_WRITE = (("issues", "write"), ("pull_requests", "write"))


@dataclass
class Ctx:
    """What one request handler needs: the store, the deliverer, the caller and the base URL."""

    state: SandboxState
    deliverer: Deliverer
    caller: Caller
    base: str
    request: Request

    def require_user(self) -> str:
        """The calling user's login; 401 for anonymous callers, 403 for App JWTs."""
        if self.caller.kind == "anonymous":
            raise SandboxError(401, "Requires authentication")
        if self.caller.kind == "app" or self.caller.login is None:
            raise SandboxError(403, "Resource not accessible by integration")
        return self.caller.login

    def require_app(self) -> int:
        if self.caller.kind != "app" or self.caller.app_id is None:
            raise SandboxError(401, "A JSON web token could not be decoded")
        return self.caller.app_id


def ctx(request: Request) -> Ctx:
    state: SandboxState = request.app.state.sandbox
    caller = resolve(state, request.headers.get("authorization"))
    base = str(request.base_url).rstrip("/")
    return Ctx(state, request.app.state.deliverer, caller, base, request)


def may_see(state: SandboxState, caller: Caller, repo: Repo) -> bool:
    """Whether `caller` may read `repo`: anyone a public one outside a token's repository
    list; a private one, its collaborators and the tokens of an installation covering it."""
    if caller.repositories is not None and repo.name not in caller.repositories:
        return False
    if not repo.private:
        return True
    if caller.installation_id is not None:
        installation = state.installations.get(caller.installation_id)
        return installation is not None and installation.account in (repo.owner, None)
    return caller.login is not None and state.permission(repo, caller.login) != "none"


def require(c: Ctx, repo: Repo | None, *needs: tuple[str, str]) -> None:
    """GitHub's check of an installation token's permissions: unless it holds one of `needs`
    (alternative (permission, level) pairs), 403 "Resource not accessible by integration",
    with `X-Accepted-GitHub-Permissions` naming them. Reading a public repository needs none
    (GitHub shows it to anyone); a user's token is not checked here (its role is)."""
    held = c.caller.permissions
    if held is None:
        return
    if repo is not None and not repo.private and all(level == "read" for _, level in needs):
        return
    if any(grants(held, name, level) for name, level in needs):
        return
    accepted = "; ".join(f"{name}={level}" for name, level in needs)
    raise SandboxError(403, NOT_ACCESSIBLE, {ACCEPTED_HEADER: accepted})


def visible_repo(c: Ctx, owner: str, name: str) -> Repo:
    """The repository, or 404 when it does not exist or the caller may not see it."""
    repo = c.state.repo(owner, name)
    if not may_see(c.state, c.caller, repo):
        raise SandboxError(404, "Not Found")
    return repo


def paginate(request: Request, items: list[Any], response: Response) -> list[Any]:
    """One page of `items` (`page`, `per_page` ≤ 100) with GitHub's Link header."""
    try:
        page = max(1, int(request.query_params.get("page", 1)))
        per_page = min(100, max(1, int(request.query_params.get("per_page", 30))))
    except ValueError as exc:
        raise SandboxError(422, "page and per_page must be integers") from exc
    last = max(1, -(-len(items) // per_page))
    links = []

    def link(p: int, rel: str) -> str:
        url = request.url.include_query_params(page=p, per_page=per_page)
        return f'<{url}>; rel="{rel}"'

    if page < last:
        links += [link(page + 1, "next"), link(last, "last")]
    if page > 1:
        links += [link(1, "first"), link(page - 1, "prev")]
    if links:
        response.headers["Link"] = ", ".join(links)
    return items[(page - 1) * per_page : page * per_page]


def _pull_for_issue(c: Ctx, repo: Repo, number: int) -> Pull:
    """Issue `number`, a pull request or a plain issue."""
    return c.state.issue(repo, number)


def _resolve_sha(repo: Repo, ref: str) -> str:
    try:
        return git.resolve(repo.git_path, ref)
    except git.GitError as exc:
        raise SandboxError(422, f"No commit found for SHA: {ref}") from exc


# -- users, rate limit, apps ----------------------------------------------------------------


@router.get("/user")
def get_user(request: Request) -> Json:
    c = ctx(request)
    if c.caller.installation_id is not None:
        raise SandboxError(403, "Resource not accessible by integration")
    login = c.require_user()
    with c.state.lock:
        return shapes.full_user_json(c.base, c.state.user(login))


@router.get("/users/{login}")
def get_named_user(login: str, request: Request) -> Json:
    c = ctx(request)
    with c.state.lock:
        return shapes.full_user_json(c.base, c.state.user(login))


@router.get("/rate_limit")
def rate_limit(request: Request) -> Json:
    c = ctx(request)
    key = c.caller.login or (f"app:{c.caller.app_id}" if c.caller.app_id else "-")
    with c.state.lock:
        used = c.state.rate_used.get(key, 0)
        core = {
            "limit": c.state.rate_limit,
            "used": used,
            "remaining": max(0, c.state.rate_limit - used),
            "reset": c.state.rate_reset,
            "resource": "core",
        }
    other = {**core, "used": 0, "remaining": core["limit"]}
    return {
        "resources": {
            "core": core,
            "search": {**other, "resource": "search"},
            "graphql": {**other, "resource": "graphql"},
        },
        "rate": core,
    }


@router.get("/app")
def get_app(request: Request) -> Json:
    c = ctx(request)
    app_id = c.require_app()
    with c.state.lock:
        return shapes.app_json(c.base, c.state, c.state.apps[app_id])


@router.get("/app/installations")
def list_installations(request: Request, response: Response) -> list[Json]:
    c = ctx(request)
    app_id = c.require_app()
    with c.state.lock:
        items = [
            shapes.installation_json(c.base, c.state, i)
            for i in c.state.installations.values()
            if i.app_id == app_id
        ]
    return paginate(request, items, response)


@router.get("/app/installations/{installation_id:int}")
def get_installation(installation_id: int, request: Request) -> Json:
    c = ctx(request)
    app_id = c.require_app()
    with c.state.lock:
        inst = c.state.installations.get(installation_id)
        if inst is None or inst.app_id != app_id:
            raise SandboxError(404, "Not Found")
        return shapes.installation_json(c.base, c.state, inst)


@router.post("/app/installations/{installation_id:int}/access_tokens", status_code=201)
def create_access_token(
    installation_id: int, request: Request, payload: OptionalBody = None
) -> Json:
    c = ctx(request)
    app_id = c.require_app()
    with c.state.lock:
        inst = c.state.installations.get(installation_id)
        if inst is None or inst.app_id != app_id:
            raise SandboxError(404, "Not Found")
        app = c.state.apps[app_id]
        asked = payload or {}
        names = asked.get("repositories")
        if names is not None:
            names = tuple(str(n) for n in names)
            owned = {r.name for r in c.state.repos.values() if inst.account in (r.owner, None)}
            if not names or not set(names) <= owned:
                raise SandboxError(
                    422,
                    "There is at least one repository that does not exist or is not "
                    "accessible to the parent installation.",
                )
        permissions = asked.get("permissions") or dict(inst.permissions)
        if not isinstance(permissions, dict) or not all(
            isinstance(level, str)
            and level in ("read", "write", "admin")
            and grants(inst.permissions, str(name), level)
            for name, level in permissions.items()
        ):
            raise SandboxError(
                422, "The permissions requested are not granted to this installation."
            )
        grant = c.state.add_token(
            app.bot_login,
            installation_id=inst.id,
            expires_at=now() + INSTALLATION_TOKEN_TTL,
            repositories=names,
            permissions={str(k): str(v) for k, v in permissions.items()},
        )
        return {
            "token": grant.token,
            "expires_at": shapes.ts(grant.expires_at),
            "permissions": permissions,
            "repository_selection": "all" if names is None else "selected",
        }


@router.get("/repos/{owner}/{name}/installation")
def repo_installation(owner: str, name: str, request: Request) -> Json:
    c = ctx(request)
    app_id = c.require_app()
    with c.state.lock:
        inst = c.state.installation_for(c.state.repo(owner, name), app_id)
        if inst is None:
            raise SandboxError(404, "Not Found")
        return shapes.installation_json(c.base, c.state, inst)


@router.get("/orgs/{account}/installation")
@router.get("/users/{account}/installation")
def account_installation(account: str, request: Request) -> Json:
    c = ctx(request)
    app_id = c.require_app()
    with c.state.lock:
        found = sorted(
            (
                i
                for i in c.state.installations.values()
                if i.app_id == app_id and i.account in (account, None)
            ),
            key=lambda i: i.account is None,
        )
        if not found:
            raise SandboxError(404, "Not Found")
        return shapes.installation_json(c.base, c.state, found[0])


# -- repositories, pull requests, issues -----------------------------------------------------


@router.get("/repos/{owner}/{name}")
def get_repo(owner: str, name: str, request: Request) -> Json:
    c = ctx(request)
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, ("metadata", "read"))
        return shapes.repo_json(c.base, c.state, repo, viewer=c.caller.login)


@router.get("/repos/{owner}/{name}/pulls")
def list_pulls(owner: str, name: str, request: Request, response: Response) -> list[Json]:
    c = ctx(request)
    wanted = request.query_params.get("state", "open")
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, ("pull_requests", "read"))
        pulls = sorted(
            (
                p
                for p in c.state.pulls.values()
                if p.repo == repo.full_name and p.is_pull and wanted in ("all", p.state)
            ),
            key=lambda p: -p.number,
        )
        items = [shapes.pull_json(c.base, c.state, repo, p) for p in pulls]
    return paginate(request, items, response)


@router.get("/repos/{owner}/{name}/pulls/{number:int}")
def get_pull(owner: str, name: str, number: int, request: Request) -> Json:
    c = ctx(request)
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, ("pull_requests", "read"))
        return shapes.pull_json(c.base, c.state, repo, c.state.pull(repo, number))


MAX_PULL_FILES = 3000  # GitHub lists at most 3,000 files of a pull request


@router.get("/repos/{owner}/{name}/pulls/{number:int}/files")
def list_pull_files(
    owner: str, name: str, number: int, request: Request, response: Response
) -> list[Json]:
    """The files the pull request changes since its merge base, 30 a page (`per_page` ≤ 100),
    renames with their `previous_filename`, each with its `patch` (none for a binary or a
    large one); past 3,000 the rest is not listed (the pull request's `changed_files` still
    counts them), as GitHub does."""
    c = ctx(request)
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, ("pull_requests", "read"))
        pull = c.state.pull(repo, number)
    try:
        files = git.pull_files(repo.git_path, pull.base_sha, pull.head_sha)[:MAX_PULL_FILES]
        patches = git.pull_patches(repo.git_path, pull.base_sha, pull.head_sha)
    except git.GitError as exc:
        raise SandboxError(404, "Not Found") from exc
    page = paginate(request, list(files), response)
    return [shapes.pull_file_json(c.base, repo, pull, f, patches.get(f.path)) for f in page]


@router.get("/repos/{owner}/{name}/issues/{number:int}")
def get_issue(owner: str, name: str, number: int, request: Request) -> Json:
    c = ctx(request)
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, *CONVERSATION_READ)
        return shapes.issue_json(c.base, c.state, repo, _pull_for_issue(c, repo, number))


# -- issue comments and reactions ----------------------------------------------------------


@router.get("/repos/{owner}/{name}/issues/comments")
def list_repo_comments(owner: str, name: str, request: Request, response: Response) -> list[Json]:
    c = ctx(request)
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, *CONVERSATION_READ)
        items = [
            shapes.comment_json(c.base, c.state, repo, cm)
            for cm in c.state.comments.values()
            if cm.repo == repo.full_name and not cm.deleted
        ]
    return paginate(request, items, response)


@router.get("/repos/{owner}/{name}/issues/{number:int}/comments")
def list_comments(
    owner: str, name: str, number: int, request: Request, response: Response
) -> list[Json]:
    c = ctx(request)
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, *CONVERSATION_READ)
        pull = _pull_for_issue(c, repo, number)
        items = [shapes.comment_json(c.base, c.state, repo, cm) for cm in c.state.comments_on(pull)]
    return paginate(request, items, response)


MAX_BODY_CHARS = 65536  # GitHub refuses longer comment bodies with 422
MAX_DESCRIPTION_CHARS = 140  # ... and longer commit status descriptions


def _body_of(payload: Json | None) -> str:
    body = (payload or {}).get("body")
    if not isinstance(body, str) or not body:
        raise SandboxError(422, 'Invalid request.\n\n"body" wasn\'t supplied.')
    if len(body) > MAX_BODY_CHARS:
        raise SandboxError(
            422, f"Validation Failed: body is too long (maximum is {MAX_BODY_CHARS} characters)"
        )
    return body


@router.post("/repos/{owner}/{name}/issues/{number:int}/comments", status_code=201)
def create_comment(
    owner: str, name: str, number: int, request: Request, payload: OptionalBody = None
) -> Json:
    c = ctx(request)
    login = c.require_user()
    body = _body_of(payload)
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, *CONVERSATION_WRITE)
        pull = _pull_for_issue(c, repo, number)
        comment = c.state.add_comment(pull, login, body)
        emit_comment_event(c.deliverer, c.base, repo, pull, comment, "created", login)
        return shapes.comment_json(c.base, c.state, repo, comment)


def emit_comment_event(
    deliverer: Deliverer,
    base: str,
    repo: Repo,
    pull: Pull,
    comment: Comment,
    action: str,
    sender: str,
    old_body: str | None = None,
) -> None:
    """Deliver `issue_comment` for a comment change (shared with the admin API)."""
    payload = issue_comment_payload(
        base, deliverer.state, repo, pull, comment, action, sender, old_body
    )
    deliverer.emit("issue_comment", payload, repo=repo)


def _editable_comment(c: Ctx, owner: str, name: str, comment_id: int) -> tuple[Repo, Comment, str]:
    login = c.require_user()
    repo = visible_repo(c, owner, name)
    require(c, repo, *CONVERSATION_WRITE)
    comment = c.state.comment(repo, comment_id)
    rank = shapes.RANK[c.state.permission(repo, login)]
    if comment.user != login and rank < shapes.RANK["write"]:
        raise SandboxError(403, "You cannot edit or delete another user's comment")
    return repo, comment, login


@router.get("/repos/{owner}/{name}/issues/comments/{comment_id:int}")
def get_comment(owner: str, name: str, comment_id: int, request: Request) -> Json:
    c = ctx(request)
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, *CONVERSATION_READ)
        return shapes.comment_json(c.base, c.state, repo, c.state.comment(repo, comment_id))


@router.patch("/repos/{owner}/{name}/issues/comments/{comment_id:int}")
def edit_comment(
    owner: str,
    name: str,
    comment_id: int,
    request: Request,
    payload: OptionalBody = None,
) -> Json:
    c = ctx(request)
    body = _body_of(payload)
    with c.state.lock:
        repo, comment, login = _editable_comment(c, owner, name, comment_id)
        old = c.state.edit_comment(comment, body, login)
        pull = c.state.issue(repo, comment.issue_number)
        emit_comment_event(c.deliverer, c.base, repo, pull, comment, "edited", login, old)
        return shapes.comment_json(c.base, c.state, repo, comment)


@router.delete("/repos/{owner}/{name}/issues/comments/{comment_id:int}", status_code=204)
def delete_comment(owner: str, name: str, comment_id: int, request: Request) -> Response:
    c = ctx(request)
    with c.state.lock:
        repo, comment, login = _editable_comment(c, owner, name, comment_id)
        c.state.delete_comment(comment)
        pull = c.state.issue(repo, comment.issue_number)
        emit_comment_event(c.deliverer, c.base, repo, pull, comment, "deleted", login)
    return Response(status_code=204)


@router.get("/repos/{owner}/{name}/issues/comments/{comment_id:int}/reactions")
def list_reactions(
    owner: str, name: str, comment_id: int, request: Request, response: Response
) -> list[Json]:
    c = ctx(request)
    wanted = request.query_params.get("content")
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, *CONVERSATION_READ)
        comment = c.state.comment(repo, comment_id)
        items = [
            shapes.reaction_json(c.base, c.state, r)
            for r in c.state.reactions_on(comment.id)
            if wanted in (None, r.content)
        ]
    return paginate(request, items, response)


@router.post("/repos/{owner}/{name}/issues/comments/{comment_id:int}/reactions")
def create_reaction(
    owner: str,
    name: str,
    comment_id: int,
    request: Request,
    payload: OptionalBody = None,
) -> JSONResponse:
    c = ctx(request)
    login = c.require_user()
    content = (payload or {}).get("content")
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, *CONVERSATION_WRITE)
        comment = c.state.comment(repo, comment_id)
        reaction, created = c.state.add_reaction(comment, login, str(content))
        data = shapes.reaction_json(c.base, c.state, reaction)
    return JSONResponse(data, status_code=201 if created else 200)


@router.delete(
    "/repos/{owner}/{name}/issues/comments/{comment_id:int}/reactions/{reaction_id:int}",
    status_code=204,
)
def delete_reaction(
    owner: str, name: str, comment_id: int, reaction_id: int, request: Request
) -> Response:
    c = ctx(request)
    login = c.require_user()
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, *CONVERSATION_WRITE)
        comment = c.state.comment(repo, comment_id)
        reaction = c.state.reactions.get(reaction_id)
        if reaction is not None and reaction.user != login:
            raise SandboxError(403, "You cannot delete another user's reaction")
        c.state.delete_reaction(comment, reaction_id)
    return Response(status_code=204)


# -- commits and statuses ------------------------------------------------------------------


@router.post("/repos/{owner}/{name}/statuses/{sha}", status_code=201)
def create_status(
    owner: str, name: str, sha: str, request: Request, payload: OptionalBody = None
) -> Json:
    c = ctx(request)
    login = c.require_user()
    data = payload or {}
    description = data.get("description")
    if isinstance(description, str) and len(description) > MAX_DESCRIPTION_CHARS:
        raise SandboxError(
            422,
            "Validation Failed: description is too long "
            f"(maximum is {MAX_DESCRIPTION_CHARS} characters)",
        )
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, ("statuses", "write"))
    full_sha = _resolve_sha(repo, sha)
    with c.state.lock:
        status = c.state.add_status(
            repo,
            full_sha,
            state=str(data.get("state")),
            context=str(data.get("context") or "default"),
            description=data.get("description"),
            target_url=data.get("target_url"),
            creator=login,
        )
        return shapes.status_json(c.base, c.state, repo, status)


@router.get("/repos/{owner}/{name}/statuses/{ref}")
@router.get("/repos/{owner}/{name}/commits/{ref}/statuses")
def list_statuses(
    owner: str, name: str, ref: str, request: Request, response: Response
) -> list[Json]:
    c = ctx(request)
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, ("statuses", "read"))
    sha = _resolve_sha(repo, ref)
    with c.state.lock:
        items = [
            shapes.status_json(c.base, c.state, repo, s) for s in c.state.statuses_for(repo, sha)
        ]
    return paginate(request, items, response)


# -- check runs ----------------------------------------------------------------------------


def _checks_app(c: Ctx) -> int:
    """The App an installation token acts for: only GitHub Apps may write check runs."""
    inst_id = c.caller.installation_id
    inst = c.state.installations.get(inst_id) if inst_id is not None else None
    if c.caller.kind == "anonymous":
        raise SandboxError(401, "Requires authentication")
    if inst is None:
        raise SandboxError(403, "You must authenticate via a GitHub App.")
    return inst.app_id


@router.post("/repos/{owner}/{name}/check-runs", status_code=201)
def create_check_run(owner: str, name: str, request: Request, payload: OptionalBody = None) -> Json:
    c = ctx(request)
    app_id = _checks_app(c)
    data = payload or {}
    head = data.get("head_sha")
    if not isinstance(head, str) or not head:
        raise SandboxError(422, "Validation Failed: head_sha wasn't supplied.")
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, ("checks", "write"))
    sha = _resolve_sha(repo, head)
    with c.state.lock:
        run = c.state.add_check_run(repo, app_id, sha, data)
        return check_run_json(c.base, c.state, repo, run)


def _own_check_run(c: Ctx, owner: str, name: str, run_id: int) -> tuple[Repo, Any]:
    app_id = _checks_app(c)
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, ("checks", "write"))
        run = c.state.check_run(repo, run_id)
    if run.app_id != app_id:
        raise SandboxError(
            403,
            f"Invalid app_id `{app_id}` - check run can only be modified by the "
            "GitHub App that created it.",
        )
    return repo, run


@router.patch("/repos/{owner}/{name}/check-runs/{run_id:int}")
def update_check_run(
    owner: str, name: str, run_id: int, request: Request, payload: OptionalBody = None
) -> Json:
    c = ctx(request)
    repo, run = _own_check_run(c, owner, name, run_id)
    with c.state.lock:
        run = c.state.update_check_run(run, payload or {})
        return check_run_json(c.base, c.state, repo, run)


@router.get("/repos/{owner}/{name}/check-runs/{run_id:int}")
def get_check_run(owner: str, name: str, run_id: int, request: Request) -> Json:
    c = ctx(request)
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, ("checks", "read"))
        return check_run_json(c.base, c.state, repo, c.state.check_run(repo, run_id))


@router.get("/repos/{owner}/{name}/commits/{ref}/check-runs")
def list_check_runs(owner: str, name: str, ref: str, request: Request, response: Response) -> Json:
    """A commit's check runs, newest first; `filter=latest` (the default) keeps the newest of
    each name; `check_name`, `status` and `app_id` narrow them."""
    c = ctx(request)
    query = request.query_params
    if query.get("filter", "latest") not in ("latest", "all"):
        raise SandboxError(422, "filter must be latest or all")
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, ("checks", "read"))
    sha = _resolve_sha(repo, ref)
    with c.state.lock:
        runs = c.state.check_runs_for(repo, sha)
        if query.get("filter", "latest") == "latest":
            newest: dict[str, Any] = {}
            for run in runs:
                newest.setdefault(run.name, run)
            runs = list(newest.values())
        if "check_name" in query:
            runs = [r for r in runs if r.name == query["check_name"]]
        if "status" in query:
            runs = [r for r in runs if r.status == query["status"]]
        if "app_id" in query:
            runs = [r for r in runs if str(r.app_id) == query["app_id"]]
        items = [check_run_json(c.base, c.state, repo, r) for r in runs]
    page = paginate(request, items, response)
    return {"total_count": len(items), "check_runs": page}


@router.post("/repos/{owner}/{name}/check-runs/{run_id:int}/rerequest", status_code=201)
def rerequest_check_run(owner: str, name: str, run_id: int, request: Request) -> Json:
    """The Re-run button: GitHub tells the App with a `check_run` `rerequested` event. Anyone
    with write access may press it."""
    c = ctx(request)
    login = c.require_user()
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, ("checks", "write"))
        run = c.state.check_run(repo, run_id)
        if c.caller.installation_id is None and c.state.permission(repo, login) not in (
            "write",
            "maintain",
            "admin",
        ):
            raise SandboxError(403, "Resource not accessible by personal access token")
        payload = check_run_payload(c.base, c.state, repo, run, "rerequested", login)
    c.deliverer.emit("check_run", payload, repo=repo)
    return {}


@router.get("/repos/{owner}/{name}/commits/{ref}/status")
def combined_status(owner: str, name: str, ref: str, request: Request) -> Json:
    c = ctx(request)
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, ("statuses", "read"))
    sha = _resolve_sha(repo, ref)
    with c.state.lock:
        return shapes.combined_status_json(
            c.base, c.state, repo, sha, c.state.statuses_for(repo, sha)
        )


@router.get("/repos/{owner}/{name}/commits/{ref}")
def get_commit(owner: str, name: str, ref: str, request: Request) -> Json:
    c = ctx(request)
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, ("contents", "read"))
    sha = _resolve_sha(repo, ref)
    try:
        info = git.commit_info(repo.git_path, sha)
    except git.GitError as exc:
        raise SandboxError(422, f"No commit found for SHA: {ref}") from exc
    with c.state.lock:
        return shapes.commit_json(c.base, c.state, repo, info)


@router.get("/repos/{owner}/{name}/contents")
def get_root_contents(owner: str, name: str, request: Request) -> Json | list[Json]:
    """The repository's root directory (`contents` with no path)."""
    return get_contents(owner, name, "", request)


@router.get("/repos/{owner}/{name}/contents/{path:path}")
def get_contents(owner: str, name: str, path: str, request: Request) -> Json | list[Json]:
    """A file (base64 content), a directory (its entries), a symlink or a submodule at `ref`
    (branch, tag or SHA; the default branch when not given), read from the git repository."""
    c = ctx(request)
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, ("contents", "read"))
    try:
        return contents.contents(c.base, repo, path, request.query_params.get("ref"))
    except git.GitError as exc:
        raise SandboxError(404, "Not Found") from exc


# -- permissions and teams -----------------------------------------------------------------


@router.get("/repos/{owner}/{name}/collaborators/{login}/permission")
def collaborator_permission(owner: str, name: str, login: str, request: Request) -> Json:
    c = ctx(request)
    if c.caller.kind == "anonymous":
        raise SandboxError(401, "Requires authentication")
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        require(c, repo, ("metadata", "read"))
        return shapes.permission_json(c.base, c.state, repo, c.state.user(login))


@router.get("/repos/{owner}/{name}/collaborators/{login}", status_code=204)
def is_collaborator(owner: str, name: str, login: str, request: Request) -> Response:
    c = ctx(request)
    with c.state.lock:
        repo = visible_repo(c, owner, name)
        if login not in repo.collaborators:
            raise SandboxError(404, "Not Found")
    return Response(status_code=204)


@router.get("/orgs/{org}")
def get_org(org: str, request: Request) -> Json:
    c = ctx(request)
    with c.state.lock:
        user = c.state.user(org)
        if user.type != "Organization":
            raise SandboxError(404, "Not Found")
        data = shapes.full_user_json(c.base, user)
        data["url"] = f"{c.base}/orgs/{org}"
        return data


def _team(c: Ctx, org: str, slug: str) -> Team:
    team = c.state.teams.get((org, slug))
    if team is None:
        raise SandboxError(404, "Not Found")
    return team


@router.get("/orgs/{org}/teams/{slug}")
def get_team(org: str, slug: str, request: Request) -> Json:
    c = ctx(request)
    require(c, None, ("members", "read"))
    with c.state.lock:
        return shapes.team_json(c.base, c.state, _team(c, org, slug))


def _membership(c: Ctx, team: Team, login: str) -> Json:
    role = team.members.get(login)
    if role is None:
        raise SandboxError(404, "Not Found")
    return {
        "url": f"{c.base}/orgs/{team.org}/teams/{team.slug}/memberships/{login}",
        "role": role,
        "state": "active",
    }


@router.get("/orgs/{org}/teams/{slug}/memberships/{login}")
def team_membership(org: str, slug: str, login: str, request: Request) -> Json:
    c = ctx(request)
    require(c, None, ("members", "read"))
    with c.state.lock:
        return _membership(c, _team(c, org, slug), login)


@router.get("/teams/{team_id:int}/memberships/{login}")
def team_membership_by_id(team_id: int, login: str, request: Request) -> Json:
    c = ctx(request)
    require(c, None, ("members", "read"))
    with c.state.lock:
        for team in c.state.teams.values():
            if team.id == team_id:
                return _membership(c, team, login)
    raise SandboxError(404, "Not Found")


@router.get("/app/hook/config")
def app_hook_config(request: Request) -> Json:
    """The App's webhook configuration, the secret masked as GitHub masks it."""
    c = ctx(request)
    c.require_app()
    with c.state.lock:
        hook = c.state.webhook
        if hook is None:
            return {"content_type": "json", "insecure_ssl": "0", "url": ""}
        shown: Json = {"content_type": hook.content_type, "insecure_ssl": "0", "url": hook.url}
        if hook.secret:
            shown["secret"] = "********"
        return shown


@router.get("/app/hook/deliveries")
def app_hook_deliveries(request: Request) -> list[Json]:
    """The App's recent webhook deliveries, newest first, with each one's last answer: where
    GitHub shows a wrong secret (the receiver's 401s)."""
    c = ctx(request)
    c.require_app()
    try:
        per_page = min(100, max(1, int(request.query_params.get("per_page", 30))))
    except ValueError as exc:
        raise SandboxError(422, "per_page must be an integer") from exc
    with c.state.lock:
        recent = list(c.state.deliveries.values())[::-1][:per_page]
        items: list[Json] = []
        for number, delivery in enumerate(recent, start=1):
            last = delivery.attempts[-1] if delivery.attempts else None
            code = last.status_code if last is not None else None
            items.append({
                "id": number,
                "guid": delivery.id,
                "delivered_at": delivery.created_at.isoformat().replace("+00:00", "Z"),
                "redelivery": len(delivery.attempts) > 1,
                "duration": (last.duration_ms / 1000) if last is not None else 0,
                "status": "OK" if code is not None and code < 300 else (
                    f"Invalid HTTP Response: {code}" if code is not None else "Pending"
                ),
                "status_code": code or 0,
                "event": delivery.event,
                "action": delivery.action,
            })  # fmt: skip
    return items
