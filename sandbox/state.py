"""The sandbox's in-memory store: users, apps, repositories, pull requests, comments, reactions,
statuses, webhook deliveries and faults, behind one re-entrant lock.

Every mutation bumps `version` and wakes `wait_for` callers, so tests can wait for a condition
instead of sleeping.
"""

from __future__ import annotations

import itertools
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from service.github.permissions import app_permissions

UserType = Literal["User", "Bot", "Organization"]
PERMISSIONS = ("none", "read", "triage", "write", "maintain", "admin")
REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")
STATUS_STATES = ("error", "failure", "pending", "success")
CHECK_STATUSES = ("queued", "in_progress", "completed", "waiting", "requested", "pending")
CHECK_CONCLUSIONS = (
    "action_required",
    "cancelled",
    "failure",
    "neutral",
    "success",
    "skipped",
    "stale",
    "timed_out",
)
MAX_CHECK_OUTPUT_CHARS = 65535  # GitHub's limit on a check run's output summary and text
MAX_CHECK_NAME_CHARS = 255
FAULT_STATUSES = (403, 429, 500, 502, 503)
ACCESS = {"none": 0, "read": 1, "write": 2, "admin": 3}  # an App permission's levels
T = TypeVar("T")


def manifest_permissions() -> dict[str, str]:
    """What a sandbox App is registered with unless told otherwise: everything this project's
    App manifest asks for (`service/github/permissions.py`), team memberships included."""
    return {p.name: p.level for p in app_permissions(teams=True)}


def grants(permissions: dict[str, str], name: str, level: str) -> bool:
    """Whether `permissions` reach `name` at `level`; GitHub gives every App metadata read."""
    have = "read" if name == "metadata" else "none"
    have = max(have, permissions.get(name, "none"), key=lambda v: ACCESS.get(v, 0))
    return ACCESS.get(have, 0) >= ACCESS[level]


class SandboxError(Exception):
    """A request the sandbox refuses; `status` is the HTTP status to answer, with `headers`."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


def now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


@dataclass
class User:
    id: int
    login: str
    type: UserType
    created_at: datetime


@dataclass
class App:
    id: int
    slug: str
    name: str
    public_key_pem: str
    owner: str
    bot_login: str
    created_at: datetime
    permissions: dict[str, str] = field(default_factory=manifest_permissions)  # registered


@dataclass
class Installation:
    id: int
    app_id: int
    account: str | None  # None: every repository in the sandbox
    created_at: datetime
    permissions: dict[str, str] = field(default_factory=dict)  # what its owner accepted


@dataclass
class Token:
    token: str
    login: str
    installation_id: int | None = None
    expires_at: datetime | None = None
    repositories: tuple[str, ...] | None = None  # names it is limited to (installation tokens)
    permissions: dict[str, str] | None = None  # an installation token's, fixed when minted


@dataclass
class Team:
    id: int
    org: str
    slug: str
    name: str
    members: dict[str, str] = field(default_factory=dict)  # login -> "member" | "maintainer"


@dataclass
class Repo:
    id: int
    owner: str
    name: str
    git_path: str
    default_branch: str
    private: bool
    created_at: datetime
    collaborators: dict[str, str] = field(default_factory=dict)  # login -> permission

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


@dataclass
class Pull:
    id: int
    issue_id: int
    repo: str
    number: int
    title: str
    body: str
    user: str
    head_ref: str
    head_sha: str
    base_ref: str
    base_sha: str
    state: Literal["open", "closed"]
    merged: bool
    created_at: datetime
    updated_at: datetime
    closed_at: datetime | None = None
    commits: int = 1
    is_pull: bool = True  # False: a plain issue (no head/base), sharing the number space
    merge_commit_sha: str | None = None  # the commit its merge made on the base branch
    labels: list[str] = field(default_factory=list)
    state_reason: str | None = None  # a closed issue's: completed, not_planned


@dataclass
class Revision:
    """One version of a comment's body: who wrote it and when."""

    body: str
    at: datetime
    by: str


@dataclass
class Comment:
    id: int
    repo: str
    issue_number: int
    user: str
    body: str
    created_at: datetime
    updated_at: datetime
    history: list[Revision] = field(default_factory=list)
    deleted: bool = False


@dataclass
class Reaction:
    id: int
    comment_id: int
    user: str
    content: str
    created_at: datetime


@dataclass
class Status:
    id: int
    repo: str
    sha: str
    state: str
    context: str
    description: str | None
    target_url: str | None
    creator: str
    created_at: datetime


@dataclass
class CheckRun:
    """A check run an App made on a commit; `output` holds title, summary and text."""

    id: int
    repo: str
    head_sha: str
    name: str
    app_id: int
    status: str
    conclusion: str | None
    details_url: str | None
    external_id: str | None
    output: dict[str, str | None]
    started_at: datetime
    completed_at: datetime | None
    updates: int = 0  # how often it was changed after its creation


@dataclass
class Attempt:
    """One HTTP attempt of a webhook delivery."""

    at: datetime
    status_code: int | None
    error: str | None
    duration_ms: int


@dataclass
class Delivery:
    id: str
    event: str
    action: str | None
    url: str
    body: bytes
    headers: dict[str, str]
    created_at: datetime
    attempts: list[Attempt] = field(default_factory=list)

    @property
    def status_code(self) -> int | None:
        return self.attempts[-1].status_code if self.attempts else None


@dataclass
class Fault:
    id: int
    status: int
    remaining: int
    path_prefix: str | None
    retry_after: int | None
    method: str | None
    kind: str = "primary"  # for a 403: "primary" (no requests left) or "secondary"
    # The request is carried out and only its answer is the fault: a 5xx after the write
    # happened, as when a proxy in front of GitHub times out (or the caller dies) mid-call.
    applied: bool = False


@dataclass
class Webhook:
    url: str
    secret: str | None
    content_type: str = "json"  # or "form": `payload=<json>` url-encoded, as GitHub can send


@dataclass
class ApiCall:
    """One REST call the sandbox answered, for assertions on what a client did."""

    at: datetime
    method: str
    path: str
    status: int
    login: str | None


class SandboxState:
    """Everything the sandbox knows. Mutate only through the methods (they take the lock)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.changed = threading.Condition(self.lock)
        self.version = 0
        self._ids = itertools.count(1001)
        self.users: dict[str, User] = {}
        self.apps: dict[int, App] = {}
        self.installations: dict[int, Installation] = {}
        self.tokens: dict[str, Token] = {}
        self.teams: dict[tuple[str, str], Team] = {}
        self.repos: dict[str, Repo] = {}
        self.pulls: dict[tuple[str, int], Pull] = {}
        self.next_number: dict[str, int] = {}
        self.comments: dict[int, Comment] = {}
        self.reactions: dict[int, Reaction] = {}
        self.statuses: list[Status] = []
        self.check_runs: dict[int, CheckRun] = {}
        self.deliveries: dict[str, Delivery] = {}
        self.faults: dict[int, Fault] = {}
        self.webhook: Webhook | None = None
        self.api_calls: list[ApiCall] = []
        self.rate_used: dict[str, int] = {}
        self.rate_limit = 5000
        self.rate_reset = int(time.time()) + 3600
        self.rate_enforced = False  # refuse calls past the limit, as GitHub does (opt-in)

    # -- plumbing -------------------------------------------------------------------------

    def new_id(self) -> int:
        with self.lock:
            return next(self._ids)

    def touch(self) -> None:
        """Record that something changed and wake waiters."""
        with self.lock:
            self.version += 1
            self.changed.notify_all()

    def wait_for(self, predicate: Callable[[], T], timeout: float) -> T:
        """Block until `predicate()` (called under the lock) is truthy or `timeout` passes;
        returns its last value."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                value = predicate()
                left = deadline - time.monotonic()
                if value or left <= 0:
                    return value
                self.changed.wait(min(left, 0.5))

    # -- users, tokens, apps --------------------------------------------------------------

    def add_user(self, login: str, type_: UserType = "User") -> User:
        if not login or "/" in login or len(login) > 100:
            raise SandboxError(422, f"invalid login {login!r}")
        with self.lock:
            user = self.users.get(login)
            if user is None:
                user = User(self.new_id(), login, type_, now())
                self.users[login] = user
                self.touch()
            return user

    def user(self, login: str) -> User:
        with self.lock:
            if login not in self.users:
                raise SandboxError(404, f"Not Found (no user {login!r})")
            return self.users[login]

    def add_token(
        self,
        login: str,
        token: str | None = None,
        *,
        installation_id: int | None = None,
        expires_at: datetime | None = None,
        repositories: tuple[str, ...] | None = None,
        permissions: dict[str, str] | None = None,
    ) -> Token:
        with self.lock:
            self.user(login)
            value = token or f"{'ghs' if installation_id else 'ghp'}_{secrets.token_hex(18)}"
            grant = Token(value, login, installation_id, expires_at, repositories, permissions)
            self.tokens[value] = grant
            self.touch()
            return grant

    def token_user(self, token: str) -> Token | None:
        with self.lock:
            grant = self.tokens.get(token)
            if grant and grant.expires_at and grant.expires_at <= now():
                return None
            return grant

    def token_permissions(self, grant: Token) -> dict[str, str] | None:
        """What an installation token may do now: what it was minted with, within what its
        installation still has (None for a user's token: its collaborator roles rule)."""
        with self.lock:
            if grant.installation_id is None:
                return None
            inst = self.installations.get(grant.installation_id)
            current = inst.permissions if inst is not None else {}
            return {
                name: level
                for name, level in (grant.permissions or {}).items()
                if grants(current, name, level)
            }

    def add_app(
        self, app_id: int, public_key_pem: str, slug: str, name: str | None, owner: str | None
    ) -> App:
        with self.lock:
            if app_id in self.apps:
                raise SandboxError(422, f"app {app_id} exists")
            bot = self.add_user(f"{slug}[bot]", "Bot")
            owner_login = owner or "sandbox"
            self.add_user(owner_login, "Organization" if owner is None else "User")
            app = App(app_id, slug, name or slug, public_key_pem, owner_login, bot.login, now())
            self.apps[app_id] = app
            self.touch()
            return app

    def add_installation(
        self, app_id: int, account: str | None, installation_id: int | None = None
    ) -> Installation:
        with self.lock:
            if app_id not in self.apps:
                raise SandboxError(404, f"no app {app_id}")
            inst_id = installation_id or self.new_id()
            if inst_id in self.installations:
                raise SandboxError(422, f"installation {inst_id} exists")
            permissions = dict(self.apps[app_id].permissions)
            inst = Installation(inst_id, app_id, account, now(), permissions)
            self.installations[inst_id] = inst
            self.touch()
            return inst

    def set_installation_permissions(
        self, installation_id: int, permissions: dict[str, str]
    ) -> tuple[Installation, bool]:
        """Replace what an installation's owner accepted; True when it grants something it did
        not before (GitHub then tells the App: `installation` `new_permissions_accepted`)."""
        for name, level in permissions.items():
            if level not in ("read", "write", "admin"):
                raise SandboxError(422, f"permission {name}: {level!r} is not read, write or admin")
        with self.lock:
            inst = self.installations.get(installation_id)
            if inst is None:
                raise SandboxError(404, f"no installation {installation_id}")
            more = any(not grants(inst.permissions, n, lv) for n, lv in permissions.items())
            inst.permissions = dict(permissions)
            self.touch()
            return inst, more

    def installation_for(self, repo: Repo, app_id: int | None = None) -> Installation | None:
        """The installation covering `repo` (of `app_id`, when given): one on its owner first."""
        with self.lock:
            found = [
                i
                for i in self.installations.values()
                if (app_id is None or i.app_id == app_id) and i.account in (repo.owner, None)
            ]
            found.sort(key=lambda i: i.account is None)
            return found[0] if found else None

    def add_team(self, org: str, slug: str, members: dict[str, str]) -> Team:
        with self.lock:
            self.add_user(org, "Organization")
            for login in members:
                self.user(login)
            team = self.teams.get((org, slug))
            if team is None:
                team = Team(self.new_id(), org, slug, slug)
                self.teams[(org, slug)] = team
            team.members.update(members)
            self.touch()
            return team

    # -- repositories and pull requests ---------------------------------------------------

    def add_repo(
        self, owner: str, name: str, git_path: str, default_branch: str, private: bool
    ) -> Repo:
        with self.lock:
            full = f"{owner}/{name}"
            if full in self.repos:
                raise SandboxError(422, f"repository {full} exists")
            owner_user = self.users.get(owner) or self.add_user(owner, "User")
            repo = Repo(self.new_id(), owner, name, git_path, default_branch, private, now())
            if owner_user.type == "User":
                repo.collaborators[owner] = "admin"
            self.repos[full] = repo
            self.next_number[full] = 1
            self.touch()
            return repo

    def repo(self, owner: str, name: str) -> Repo:
        with self.lock:
            full = f"{owner}/{name}"
            if full not in self.repos:
                raise SandboxError(404, "Not Found")
            return self.repos[full]

    def set_permission(self, repo: Repo, login: str, permission: str) -> None:
        if permission not in PERMISSIONS:
            raise SandboxError(422, f"permission must be one of {', '.join(PERMISSIONS)}")
        with self.lock:
            self.user(login)
            if permission == "none":
                repo.collaborators.pop(login, None)
            else:
                repo.collaborators[login] = permission
            self.touch()

    def permission(self, repo: Repo, login: str) -> str:
        with self.lock:
            return repo.collaborators.get(login, "read" if not repo.private else "none")

    def open_pull(
        self,
        repo: Repo,
        *,
        title: str,
        body: str,
        user: str,
        head_ref: str,
        head_sha: str,
        base_ref: str,
        base_sha: str,
        commits: int,
    ) -> Pull:
        with self.lock:
            self.user(user)
            number = self.next_number[repo.full_name]
            self.next_number[repo.full_name] = number + 1
            ts = now()
            pull = Pull(
                id=self.new_id(),
                issue_id=self.new_id(),
                repo=repo.full_name,
                number=number,
                title=title,
                body=body,
                user=user,
                head_ref=head_ref,
                head_sha=head_sha,
                base_ref=base_ref,
                base_sha=base_sha,
                state="open",
                merged=False,
                created_at=ts,
                updated_at=ts,
                commits=commits,
            )
            self.pulls[(repo.full_name, number)] = pull
            self.touch()
            return pull

    def open_issue(self, repo: Repo, *, title: str, body: str, user: str) -> Pull:
        """A plain issue (not a pull request): comments on it have no `issue.pull_request`."""
        with self.lock:
            pull = self.open_pull(
                repo,
                title=title,
                body=body,
                user=user,
                head_ref="",
                head_sha="",
                base_ref="",
                base_sha="",
                commits=0,
            )
            pull.is_pull = False
            return pull

    def issue(self, repo: Repo, number: int) -> Pull:
        """Issue or pull request `number`."""
        with self.lock:
            pull = self.pulls.get((repo.full_name, number))
            if pull is None:
                raise SandboxError(404, "Not Found")
            return pull

    def pull(self, repo: Repo, number: int) -> Pull:
        """Pull request `number` (404 for a plain issue)."""
        with self.lock:
            pull = self.issue(repo, number)
            if not pull.is_pull:
                raise SandboxError(404, "Not Found")
            return pull

    def push_pull(self, pull: Pull, sha: str, commits: int) -> str:
        """Move the head of `pull` to `sha`; returns the SHA it had before."""
        with self.lock:
            if pull.state != "open":
                raise SandboxError(422, f"pull request #{pull.number} is closed")
            before = pull.head_sha
            pull.head_sha = sha
            pull.commits = commits
            pull.updated_at = now()
            self.touch()
            return before

    def merge_pull(self, pull: Pull, merge_sha: str) -> None:
        """Close `pull` as merged by the commit `merge_sha` on its base branch."""
        with self.lock:
            self.close_pull(pull, True)
            pull.merge_commit_sha = merge_sha

    def update_issue(self, issue: Pull, changes: dict[str, Any]) -> None:
        """Apply an issue edit (`title`, `body`, `state`, `state_reason`, `labels`), as
        GitHub's PATCH does: a close sets `closed_at`, a reopen clears it."""
        with self.lock:
            for name in ("title", "body", "labels", "state_reason"):
                if name in changes:
                    setattr(issue, name, changes[name])
            state = changes.get("state")
            if state is not None and state != issue.state:
                issue.state = state
                issue.closed_at = now() if state == "closed" else None
                if state == "closed" and issue.state_reason is None:
                    issue.state_reason = "completed"
                if state == "open":
                    issue.state_reason = None
            issue.updated_at = now()
            self.touch()

    def pulls_for_commit(self, repo: Repo, sha: str) -> list[Pull]:
        """The pull requests a commit belongs to, as GitHub answers `commits/{sha}/pulls`: the
        one whose merge made it, and those whose head it is."""
        with self.lock:
            return sorted(
                (
                    p
                    for (name, _), p in self.pulls.items()
                    if name == repo.full_name
                    and p.is_pull
                    and sha in (p.merge_commit_sha, p.head_sha)
                ),
                key=lambda p: -p.number,
            )

    def close_pull(self, pull: Pull, merged: bool) -> None:
        with self.lock:
            if pull.state == "closed":
                raise SandboxError(422, f"pull request #{pull.number} is already closed")
            pull.state = "closed"
            pull.merged = merged
            pull.closed_at = pull.updated_at = now()
            self.touch()

    # -- comments, reactions, statuses ----------------------------------------------------

    def add_comment(self, pull: Pull, user: str, body: str) -> Comment:
        if not body:
            raise SandboxError(422, "body is required")
        with self.lock:
            self.user(user)
            ts = now()
            comment = Comment(self.new_id(), pull.repo, pull.number, user, body, ts, ts)
            comment.history.append(Revision(body, ts, user))
            self.comments[comment.id] = comment
            pull.updated_at = ts
            self.touch()
            return comment

    def comment(self, repo: Repo, comment_id: int) -> Comment:
        with self.lock:
            comment = self.comments.get(comment_id)
            if comment is None or comment.deleted or comment.repo != repo.full_name:
                raise SandboxError(404, "Not Found")
            return comment

    def comments_on(self, pull: Pull) -> list[Comment]:
        with self.lock:
            return [
                c
                for c in self.comments.values()
                if c.repo == pull.repo and c.issue_number == pull.number and not c.deleted
            ]

    def edit_comment(self, comment: Comment, body: str, by: str) -> str:
        """Replace the body; returns the old one."""
        if not body:
            raise SandboxError(422, "body is required")
        with self.lock:
            old = comment.body
            comment.body = body
            comment.updated_at = now()
            comment.history.append(Revision(body, comment.updated_at, by))
            self.touch()
            return old

    def delete_comment(self, comment: Comment) -> None:
        with self.lock:
            comment.deleted = True
            self.touch()

    def add_reaction(self, comment: Comment, user: str, content: str) -> tuple[Reaction, bool]:
        """Add a reaction; (reaction, created) — an existing identical one is returned as is."""
        if content not in REACTIONS:
            raise SandboxError(422, f"content must be one of {', '.join(REACTIONS)}")
        with self.lock:
            for r in self.reactions.values():
                if r.comment_id == comment.id and r.user == user and r.content == content:
                    return r, False
            reaction = Reaction(self.new_id(), comment.id, user, content, now())
            self.reactions[reaction.id] = reaction
            self.touch()
            return reaction, True

    def reactions_on(self, comment_id: int) -> list[Reaction]:
        with self.lock:
            return [r for r in self.reactions.values() if r.comment_id == comment_id]

    def delete_reaction(self, comment: Comment, reaction_id: int) -> None:
        with self.lock:
            r = self.reactions.get(reaction_id)
            if r is None or r.comment_id != comment.id:
                raise SandboxError(404, "Not Found")
            del self.reactions[reaction_id]
            self.touch()

    def add_status(
        self,
        repo: Repo,
        sha: str,
        *,
        state: str,
        context: str,
        description: str | None,
        target_url: str | None,
        creator: str,
    ) -> Status:
        if state not in STATUS_STATES:
            raise SandboxError(422, f"state must be one of {', '.join(STATUS_STATES)}")
        with self.lock:
            status = Status(
                self.new_id(),
                repo.full_name,
                sha,
                state,
                context or "default",
                description,
                target_url,
                creator,
                now(),
            )
            self.statuses.append(status)
            self.touch()
            return status

    # -- check runs ------------------------------------------------------------------------

    def add_check_run(
        self, repo: Repo, app_id: int, head_sha: str, data: dict[str, Any]
    ) -> CheckRun:
        """A new check run from a create request's body, checked as GitHub checks it."""
        name = data.get("name")
        if not isinstance(name, str) or not name.strip():
            raise SandboxError(422, "Validation Failed: name wasn't supplied.")
        if len(name) > MAX_CHECK_NAME_CHARS:
            raise SandboxError(422, "Validation Failed: name is too long")
        with self.lock:
            run = CheckRun(
                id=self.new_id(),
                repo=repo.full_name,
                head_sha=head_sha,
                name=name,
                app_id=app_id,
                status="queued",
                conclusion=None,
                details_url=None,
                external_id=None,
                output={"title": None, "summary": None, "text": None},
                started_at=now(),
                completed_at=None,
            )
            _apply_check(run, data)
            self.check_runs[run.id] = run
            self.touch()
            return run

    def update_check_run(self, run: CheckRun, data: dict[str, Any]) -> CheckRun:
        if "name" in data and (not isinstance(data["name"], str) or not data["name"].strip()):
            raise SandboxError(422, "Validation Failed: name wasn't supplied.")
        with self.lock:
            changed = CheckRun(**{**run.__dict__, "output": dict(run.output)})
            if "name" in data:
                changed.name = data["name"]
            _apply_check(changed, data)
            changed.updates += 1
            self.check_runs[run.id] = changed
            self.touch()
            return changed

    def check_run(self, repo: Repo, run_id: int) -> CheckRun:
        with self.lock:
            run = self.check_runs.get(run_id)
            if run is None or run.repo != repo.full_name:
                raise SandboxError(404, "Not Found")
            return run

    def check_runs_for(self, repo: Repo, sha: str) -> list[CheckRun]:
        """Newest first."""
        with self.lock:
            runs = [r for r in self.check_runs.values() if r.repo == repo.full_name]
            return sorted((r for r in runs if r.head_sha == sha), key=lambda r: -r.id)

    def statuses_for(self, repo: Repo, sha: str) -> list[Status]:
        """Newest first, as GitHub lists them."""
        with self.lock:
            found = [s for s in self.statuses if s.repo == repo.full_name and s.sha == sha]
            return found[::-1]

    # -- webhook, deliveries, faults, call log --------------------------------------------

    def set_webhook(self, url: str | None, secret: str | None, content_type: str = "json") -> None:
        with self.lock:
            self.webhook = Webhook(url, secret, content_type) if url else None
            self.touch()

    def record_delivery(self, delivery: Delivery) -> None:
        with self.lock:
            self.deliveries[delivery.id] = delivery
            self.touch()

    def record_attempt(self, delivery_id: str, attempt: Attempt) -> None:
        with self.lock:
            self.deliveries[delivery_id].attempts.append(attempt)
            self.touch()

    def delivery(self, delivery_id: str) -> Delivery:
        with self.lock:
            if delivery_id not in self.deliveries:
                raise SandboxError(404, f"no delivery {delivery_id}")
            return self.deliveries[delivery_id]

    def add_fault(
        self,
        status: int,
        count: int,
        path_prefix: str | None,
        retry_after: int | None,
        method: str | None,
        kind: str = "primary",
        applied: bool = False,
    ) -> Fault:
        if status not in FAULT_STATUSES:
            raise SandboxError(422, f"status must be one of {FAULT_STATUSES}")
        if count < 1:
            raise SandboxError(422, "count must be at least 1")
        with self.lock:
            fault = Fault(
                self.new_id(),
                status,
                count,
                path_prefix,
                retry_after,
                method.upper() if method else None,
                kind,
                applied,
            )
            self.faults[fault.id] = fault
            self.touch()
            return fault

    def take_fault(self, method: str, path: str) -> Fault | None:
        """The first armed fault matching this request, spending one of its count."""
        with self.lock:
            for fault in list(self.faults.values()):
                if fault.path_prefix and not path.startswith(fault.path_prefix):
                    continue
                if fault.method and fault.method != method.upper():
                    continue
                fault.remaining -= 1
                if fault.remaining <= 0:
                    del self.faults[fault.id]
                self.touch()
                return fault
            return None

    def clear_faults(self) -> None:
        with self.lock:
            self.faults.clear()
            self.touch()

    def spend_rate(self, login: str | None) -> int:
        """Count one call against `login`'s hourly window; returns the calls used in it."""
        with self.lock:
            if time.time() >= self.rate_reset:
                self.rate_reset = int(time.time()) + 3600
                self.rate_used.clear()
            key = login or "-"
            self.rate_used[key] = self.rate_used.get(key, 0) + 1
            return self.rate_used[key]

    def record_call(self, method: str, path: str, status: int, login: str | None) -> None:
        """Log a REST call (the newest 2000 are kept)."""
        with self.lock:
            self.api_calls.append(ApiCall(now(), method, path, status, login))
            del self.api_calls[:-2000]
            self.touch()


def _apply_check(run: CheckRun, data: dict[str, Any]) -> None:
    """Apply the writable fields of a create or update body to `run`, with GitHub's checks: a
    known status and conclusion, a conclusion whenever the run is completed (giving one
    completes it), and an output with a title and a summary within 65,535 characters."""
    status = data.get("status")
    conclusion = data.get("conclusion")
    if status is not None and status not in CHECK_STATUSES:
        raise SandboxError(422, f"Validation Failed: status must be one of {CHECK_STATUSES}")
    if conclusion is not None and conclusion not in CHECK_CONCLUSIONS:
        raise SandboxError(422, f"Validation Failed: conclusion must be one of {CHECK_CONCLUSIONS}")
    if status == "completed" and conclusion is None and run.conclusion is None:
        raise SandboxError(422, "Validation Failed: conclusion wasn't supplied.")
    output = data.get("output")
    if output is not None:
        if not isinstance(output, dict):
            raise SandboxError(422, "Validation Failed: output is not an object")
        for key in ("title", "summary"):
            if not isinstance(output.get(key), str) or not output[key]:
                raise SandboxError(422, f"Validation Failed: output.{key} wasn't supplied.")
        for key in ("summary", "text"):
            value = output.get(key)
            if value is not None and not isinstance(value, str):
                raise SandboxError(422, f"Validation Failed: output.{key} is not a string")
            if isinstance(value, str) and len(value) > MAX_CHECK_OUTPUT_CHARS:
                raise SandboxError(
                    422,
                    f"Invalid request.\n\nOnly {MAX_CHECK_OUTPUT_CHARS} characters are "
                    f"allowed; {len(value)} were supplied.",
                )
        run.output = {k: output.get(k) for k in ("title", "summary", "text")}
    for key in ("details_url", "external_id"):
        if key in data:
            setattr(run, key, None if data[key] is None else str(data[key]))
    if conclusion is not None:
        run.conclusion = conclusion
        run.status = "completed"
        run.completed_at = run.completed_at or now()
    elif status is not None:
        run.status = status
