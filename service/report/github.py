"""The one GitHub client: PyGithub against `settings.github_api_url`, as a GitHub App
(installation tokens, refreshed by PyGithub) or with a token. Errors become `GitHubError`
saying whether and when to retry."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import requests
from github import Auth, Github, GithubException, GithubIntegration

from service.settings import Settings

T = TypeVar("T")
TIMEOUT_S = 15
# Answers that will not change on retry: the item is given up (logged), not retried forever.
PERMANENT_STATUSES = frozenset({400, 401, 404, 410, 422})


class GitHubError(Exception):
    """A failed call: `status` None for network errors; `retry_after` seconds when GitHub said."""

    def __init__(self, message: str, status: int | None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after

    @property
    def permanent(self) -> bool:
        """A retry will get the same answer (a 403 that is not a rate limit: no permission)."""
        no_permission = self.status == 403 and self.retry_after is None
        return self.status in PERMANENT_STATUSES or no_permission


@dataclass(frozen=True)
class PullInfo:
    number: int
    state: str
    head_sha: str
    head_ref: str
    base_ref: str
    base_sha: str
    clone_url: str


def _retry_after(exc: GithubException, now: float) -> float | None:
    headers = {k.lower(): v for k, v in (exc.headers or {}).items()}
    if "retry-after" in headers:
        try:
            return max(0.0, float(headers["retry-after"]))
        except ValueError:
            return None
    if headers.get("x-ratelimit-remaining") == "0" and "x-ratelimit-reset" in headers:
        try:
            return max(0.0, float(headers["x-ratelimit-reset"]) - now)
        except ValueError:
            return None
    return None


class GitHubClient:
    """Thread-safe wrapper of the few calls the service makes."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        app_id: int | None = None,
        private_key: str | None = None,
        timeout: int = TIMEOUT_S,
    ) -> None:
        if token is None and (app_id is None or private_key is None):
            raise ValueError("GitHub credentials: a token, or an App id and its private key")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self._token = token
        self._app_auth = Auth.AppAuth(app_id, private_key) if token is None else None
        self._clients: dict[str, Github] = {}
        self._lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> GitHubClient | None:
        """The client the settings describe, or None when no credentials are configured."""
        token = settings.github_token.get_secret_value() if settings.github_token else None
        if token is None and settings.github_app_id is None:
            return None
        return cls(
            settings.github_api_url,
            token=token,
            app_id=settings.github_app_id,
            private_key=settings.private_key(),
        )

    def _new(self, auth: Auth.Auth) -> Github:
        # No PyGithub retries or write throttling: the outbox owns retries and pacing.
        return Github(
            auth=auth,
            base_url=self.base_url,
            timeout=self.timeout,
            retry=None,
            seconds_between_requests=None,
            seconds_between_writes=None,
            lazy=True,
        )

    def _gh(self, repo: str) -> Github:
        """The client for `owner/name` or for an organization `owner` (one per installation)."""
        key = "token" if self._token is not None else repo.split("/")[0]
        with self._lock:
            client = self._clients.get(key)
        if client is not None:
            return client
        if self._token is not None:
            client = self._new(Auth.Token(self._token))
        else:
            assert self._app_auth is not None
            integration = GithubIntegration(
                auth=self._app_auth, base_url=self.base_url, timeout=self.timeout
            )
            if "/" in repo:
                owner, name = repo.split("/", 1)
                installation = self._call(lambda: integration.get_repo_installation(owner, name))
            else:  # an organization: team lookups have no repository to go by
                installation = self._call(lambda: integration.get_org_installation(repo))
            client = self._new(self._app_auth.get_installation_auth(installation.id))
        with self._lock:
            self._clients[key] = client
        return client

    @staticmethod
    def _call(fn: Callable[[], T]) -> T:
        try:
            return fn()
        except GithubException as exc:
            message = exc.data.get("message") if isinstance(exc.data, dict) else exc.data
            raise GitHubError(
                f"GitHub answered {exc.status}: {message}",
                exc.status,
                _retry_after(exc, time.time()),
            ) from exc
        except requests.RequestException as exc:
            raise GitHubError(f"GitHub unreachable: {exc}", None) from exc

    def _repo(self, repo: str) -> Any:
        return self._gh(repo).get_repo(repo)  # lazy: the client is built with lazy=True

    def pull(self, repo: str, number: int) -> PullInfo:
        def read() -> PullInfo:
            pr = self._repo(repo).get_pull(number)
            return PullInfo(
                number=number,
                state=pr.state,
                head_sha=pr.head.sha,
                head_ref=pr.head.ref,
                base_ref=pr.base.ref,
                base_sha=pr.base.sha,
                clone_url=pr.base.repo.clone_url,
            )

        return self._call(read)

    def permission(self, repo: str, login: str) -> str:
        """The user's permission on `repo` ("none" when not a collaborator)."""
        try:
            return self._call(lambda: self._repo(repo).get_collaborator_permission(login))
        except GitHubError as exc:
            if exc.status == 404:
                return "none"
            raise

    def team_member(self, org: str, team: str, login: str) -> bool:
        """Whether `login` is an active member of `org/team`."""
        url = f"/orgs/{org}/teams/{team}/memberships/{login}"
        try:
            _, data = self._call(lambda: self._gh(org).requester.requestJsonAndCheck("GET", url))
        except GitHubError as exc:
            if exc.status == 404:
                return False
            raise
        return isinstance(data, dict) and data.get("state") == "active"

    def _request(self, repo: str, verb: str, path: str, body: dict[str, Any] | None = None) -> Any:
        requester = self._gh(repo).requester
        _, data = self._call(lambda: requester.requestJsonAndCheck(verb, path, input=body))
        return data

    def add_reaction(self, repo: str, comment_id: int, content: str) -> None:
        path = f"/repos/{repo}/issues/comments/{comment_id}/reactions"
        self._request(repo, "POST", path, {"content": content})

    def create_comment(self, repo: str, number: int, body: str) -> int:
        data = self._request(
            repo, "POST", f"/repos/{repo}/issues/{number}/comments", {"body": body}
        )
        return int(data["id"])

    def edit_comment(self, repo: str, comment_id: int, body: str) -> None:
        self._request(repo, "PATCH", f"/repos/{repo}/issues/comments/{comment_id}", {"body": body})

    def find_comment(self, repo: str, number: int, marker: str) -> int | None:
        """The id of the PR's comment by this bot whose body starts with `marker`."""

        def scan() -> int | None:
            me = self.login()
            for comment in self._repo(repo).get_issue(number).get_comments():
                if comment.body.startswith(marker) and (me is None or comment.user.login == me):
                    return int(comment.id)
            return None

        return self._call(scan)

    def login(self) -> str | None:
        """The login comments are posted as (None for an App: its bot login is not needed)."""
        if self._token is None:
            return None
        gh = self._gh("_/_")
        return self._call(lambda: gh.get_user().login)

    def create_status(
        self, repo: str, sha: str, state: str, description: str, context: str, target_url: str
    ) -> None:
        body = {
            "state": state,
            "description": description,
            "context": context,
            "target_url": target_url,
        }
        self._request(repo, "POST", f"/repos/{repo}/statuses/{sha}", body)
