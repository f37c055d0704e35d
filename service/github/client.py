"""The one GitHub client: PyGithub against `settings.github_api_url`, as a GitHub App
(installation tokens, refreshed by PyGithub) or with a token. Errors become `GitHubError`
saying whether and when to retry; a rate limit (primary, secondary or abuse) pauses every call
of this client until it is over, so no worker keeps calling GitHub inside the window. While
GitHub is unavailable (unreachable, or answering 5xx) calls fail here at once, without going
out, except one try every few seconds (`probe_max_s` at most): no backlog of retries hammers
it, and whatever waits goes out within seconds of its return. Each outage is logged twice
(when it starts, when it ends). A refusal for a permission the App's installation lacks is a
`MissingPermission` naming it (`app_permissions.py` lists what the App asks for)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import jwt
import requests
from cryptography.hazmat.primitives import serialization
from github import Auth, Consts, Github, GithubException, GithubIntegration

from ondemand.retry import RetryPolicy
from service.github.budget import Budget
from service.github.errors import (
    SECONDARY_LIMIT_WAIT_S,
    GitHubError,
    MissingPermission,
    classify,
    missing_permission,
)
from service.github.issues import IssueCalls
from service.github.posts import PostCalls
from service.github.reads import ReadCalls
from service.settings import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")
TIMEOUT_S = 15
# Answers that say GitHub itself is failing: every call waits for the next try.
UNAVAILABLE_STATUSES = frozenset({500, 502, 503, 504})
OUTAGE_PROBE_MAX_S = 5.0
# GitHub's 403 for a permission the App's installation (or a fine-grained token) lacks:
# "Resource not accessible by integration" (or "by personal access token").
NOT_ACCESSIBLE = "resource not accessible by"
NOT_GRANTED = "not granted to this installation"  # a token asked for more than it has (422)
# How often what waits for a permission is tried again: every few minutes, backing off (an
# owner's `new_permissions_accepted` retries it at once).
PERMISSION_RETRY = RetryPolicy(base_s=60.0, cap_s=900.0)


@dataclass(frozen=True)
class InstallationInfo:
    """One installation of the App: its account and what its owner granted."""

    id: int
    account: str
    permissions: dict[str, str]
    suspended: bool = False


def _stated(client: Github) -> Budget | None:
    """What GitHub's last answer to `client` said of its hourly budget (None: nothing yet)."""
    requester = client.requester
    remaining, limit = requester.rate_limiting
    if remaining < 0 or limit <= 0:
        return None
    return Budget(remaining, limit, int(requester.rate_limiting_resettime or 0))


def app_signer(private_key: str) -> Callable[[dict[str, Any]], str]:
    """Signs the App's JWTs with its key parsed once. PyGithub makes a JWT for every call made
    as the App, and PyJWT given the PEM text parses it for every signature, checking the RSA
    key as it loads: 35 ms of CPU a call, against 0.3 ms with the key parsed once."""
    key: list[Any] = []  # parsed on first use: a bad key fails the first call, as before

    def sign(payload: dict[str, Any]) -> str:
        if not key:
            key.append(serialization.load_pem_private_key(private_key.encode(), password=None))
        return jwt.encode(payload, key=key[0], algorithm=Consts.DEFAULT_JWT_ALGORITHM)

    return sign


class GitHubClient(ReadCalls, IssueCalls, PostCalls):
    """Thread-safe wrapper of the few calls the service makes (the issue and commit calls of
    the default branch's runs in `issues.py`)."""

    def __init__(
        self,
        base_url: str,
        *,
        token: str | None = None,
        app_id: int | None = None,
        private_key: str | None = None,
        timeout: int = TIMEOUT_S,
        secondary_wait_s: float = SECONDARY_LIMIT_WAIT_S,
        probe_max_s: float = OUTAGE_PROBE_MAX_S,
    ) -> None:
        if token is None and (app_id is None or not private_key):
            raise ValueError("GitHub credentials: a token, or an App id and its private key")
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.secondary_wait_s = secondary_wait_s
        self._token = token
        self._app_auth = None
        if token is None:
            assert app_id is not None and private_key is not None  # checked above
            self._app_auth = Auth.AppAuth(app_id, sign_func=app_signer(private_key))
        self._login: str | None = None  # what comments are posted as, once asked
        self._clients: dict[str, Github] = {}
        self._installations: dict[str, int] = {}  # owner/name or owner -> installation id
        self._lock = threading.Lock()
        self._paused_until = 0.0  # time.monotonic() before which no call is made
        self._probes = RetryPolicy(base_s=0.5, cap_s=probe_max_s)
        self._down_since: float | None = None  # time.monotonic() of an outage's first failure
        self._down_failures = 0
        self._down_why = ""

    def paused_for(self) -> float:
        """Seconds before the next call may go out: a rate-limit pause, or the wait for the
        next try while GitHub is unavailable (0 when calls may go out)."""
        return max(0.0, self._paused_until - time.monotonic())

    def _unavailable(self, why: str, asked: float | None = None) -> float:
        """GitHub failed to answer: pause every call until the next try (when it `asked`, if
        it said); returns the pause."""
        now = time.monotonic()
        with self._lock:
            self._down_failures += 1
            starts = self._down_since is None
            if starts:
                self._down_since = now
            self._down_why = why
            wait = self._probes.delay(self._down_failures, asked)
            self._paused_until = max(self._paused_until, now + wait)
        if starts:
            log.warning("GitHub unavailable (%s): calls wait, tried again every few seconds", why)
        return wait

    def _pause(self, wait: float, why: str) -> None:
        """A rate limit: every call waits `wait` s; logged once when a pause starts, not for
        each call refused meanwhile (their callers log quietly)."""
        now = time.monotonic()
        with self._lock:
            starts = self._paused_until <= now
            self._paused_until = max(self._paused_until, now + wait)
        if starts:
            log.warning("GitHub rate limit (%s): calls paused for %.0fs", why, wait)

    def _available(self) -> None:
        if self._down_since is None:  # the common case: no lock
            return
        with self._lock:
            if self._down_since is None:
                return
            length, failures = time.monotonic() - self._down_since, self._down_failures
            self._down_since, self._down_failures = None, 0
        log.warning("GitHub back after %.1fs (%d calls failed meanwhile)", length, failures)

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
            secondary_wait_s=settings.github_secondary_wait_s,
            probe_max_s=settings.github_outage_probe_max_s,
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

    def budget_key(self, repo: str) -> str:
        """Which client, and so which hourly budget, serves `owner/name` or `owner`: one per
        installation (its owner), or the token's (`token`)."""
        return "token" if self._token is not None else repo.split("/")[0]

    def _gh(self, repo: str) -> Github:
        """The client for `owner/name` or for an organization `owner` (one per installation)."""
        key = self.budget_key(repo)
        with self._lock:
            client = self._clients.get(key)
        if client is not None:
            return client
        if self._token is not None:
            client = self._new(Auth.Token(self._token))
        else:
            assert self._app_auth is not None
            client = self._new(self._app_auth.get_installation_auth(self._installation(repo)))
        with self._lock:
            self._clients[key] = client
        return client

    def _integration(self) -> GithubIntegration:
        assert self._app_auth is not None
        return GithubIntegration(auth=self._app_auth, base_url=self.base_url, timeout=self.timeout)

    def _installation(self, repo: str) -> int:
        """The App's installation id for `owner/name`, or for an organization `owner` (team
        lookups have no repository to go by); asked of GitHub once per name."""
        with self._lock:
            known = self._installations.get(repo)
        if known is not None:
            return known
        integration = self._integration()
        if "/" in repo:
            owner, name = repo.split("/", 1)
            found = self._call(lambda: integration.get_repo_installation(owner, name))
        else:
            found = self._call(lambda: integration.get_org_installation(repo))
        with self._lock:
            self._installations[repo] = int(found.id)
        return int(found.id)

    def installation_of(self, repo: str) -> int | None:
        """The id of the App's installation covering `owner/name` (None for a token user, or
        when the App is not installed there)."""
        if self._app_auth is None:
            return None
        try:
            return self._installation(repo)
        except GitHubError as exc:
            if exc.status == 404:
                return None
            raise

    def read_token(self, repo: str) -> str | None:
        """A token that reads `owner/name`'s git contents and nothing more, to hand a runner
        for a private repository: in App mode a fresh installation token limited to that
        repository and `contents: read` (it lives an hour). None with a token user: the
        service's own token reads and writes everything it may, and is never handed out."""
        if self._app_auth is None:
            return None
        path = f"/app/installations/{self._installation(repo)}/access_tokens"
        body = {"repositories": [repo.split("/", 1)[1]], "permissions": {"contents": "read"}}
        integration = self._integration()
        try:
            _, data = self._call(
                lambda: integration.requester.requestJsonAndCheck("POST", path, input=body)
            )
        except GitHubError as exc:
            if exc.status == 404:  # the App was installed again: a new installation id
                with self._lock:
                    self._installations.pop(repo, None)
            if exc.status == 422 and NOT_GRANTED in str(exc):  # the installation lacks it
                raise MissingPermission(str(exc), "contents", "read") from exc
            raise
        return str(data["token"])

    def installations(self) -> list[InstallationInfo]:
        """The App's installations, each with what its owner granted (GitHub's `GET
        /app/installations`, every page); none for a token user."""
        if self._app_auth is None:
            return []
        integration = self._integration()

        def read() -> list[InstallationInfo]:
            return [
                InstallationInfo(
                    id=int(i.id),
                    account=i.account.login if i.account is not None else "",
                    permissions={str(k): str(v) for k, v in (i.permissions or {}).items()},
                    suspended=i.suspended_at is not None,
                )
                for i in integration.get_installations()
            ]

        return self._call(read)

    def forget_installation(self, installation_id: int) -> None:
        """Drop the tokens held for an installation whose permissions changed: a token carries
        what it was minted with, so the next call mints one with the new permissions."""
        with self._lock:
            names = [k for k, v in self._installations.items() if v == installation_id]
            for name in names:
                del self._installations[name]
            for owner in {name.split("/")[0] for name in names}:
                self._clients.pop(owner, None)

    def git_token(self, repo: str) -> str | None:
        """What the service itself fetches a private `owner/name` with: a read token in App
        mode, its own token otherwise."""
        return self.read_token(repo) if self._app_auth is not None else self._token

    def _call(self, fn: Callable[[], T], need: str | None = None, repo: str | None = None) -> T:
        """`fn` with this client's pauses and error mapping. `need` (`contents:read`) names
        the permission the call needs, should GitHub refuse it for one missing; `repo`'s
        installation token is then dropped, so the next try mints one that may have it."""
        left = self.paused_for()
        if left > 0:
            down = self._down_since
            if down is not None:
                message = (
                    f"GitHub unavailable for {time.monotonic() - down:.0f}s ({self._down_why})"
                )
                raise GitHubError(f"{message}; next try in {left:.1f}s", None, left, False, True)
            raise GitHubError(f"rate limited: calls paused for {left:.0f}s", None, left, True)
        try:
            result = fn()
        except GithubException as exc:
            data = exc.data.get("message") if isinstance(exc.data, dict) else exc.data
            message = str(data or "")
            headers = dict(exc.headers or {})
            limited, wait = classify(
                exc.status, message, headers, time.time(), self.secondary_wait_s
            )
            unavailable = not limited and exc.status in UNAVAILABLE_STATUSES
            if unavailable:
                wait = self._unavailable(f"{exc.status} {message}".strip(), wait)
            else:
                self._available()
            if limited and wait is not None:
                self._pause(wait, f"{exc.status} {message}".strip())
            if exc.status == 403 and not limited and NOT_ACCESSIBLE in message.lower():
                name, level = missing_permission(headers, need)
                if repo is not None and self._app_auth is not None:
                    with self._lock:
                        self._clients.pop(repo.split("/")[0], None)
                raise MissingPermission(
                    f"GitHub answered 403: {message} (needs {name}: {level})", name, level
                ) from exc
            raise GitHubError(
                f"GitHub answered {exc.status}: {message}", exc.status, wait, limited, unavailable
            ) from exc
        except requests.RequestException as exc:
            wait = self._unavailable(f"unreachable: {type(exc).__name__}")
            raise GitHubError(f"GitHub unreachable: {exc}", None, wait, False, True) from exc
        self._available()
        return result

    def _repo(self, repo: str) -> Any:
        return self._gh(repo).get_repo(repo)  # lazy: the client is built with lazy=True

    def team_member(self, org: str, team: str, login: str) -> bool:
        """Whether `login` is an active member of `org/team`."""
        url = f"/orgs/{org}/teams/{team}/memberships/{login}"
        try:
            requester = self._gh(org).requester
            _, data = self._call(
                lambda: requester.requestJsonAndCheck("GET", url), "members:read", org
            )
        except GitHubError as exc:
            if exc.status == 404:
                return False
            raise
        return isinstance(data, dict) and data.get("state") == "active"

    def _request(
        self,
        repo: str,
        verb: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        need: str | None = None,
    ) -> Any:
        requester = self._gh(repo).requester
        _, data = self._call(
            lambda: requester.requestJsonAndCheck(verb, path, input=body), need, repo
        )
        return data

    def login(self) -> str:
        """The login comments are posted as: the token's user, or the App's bot
        (`{slug}[bot]`); asked once."""
        if self._login is None:
            if self._token is None:
                self._login = f"{self.app_get('/app')['slug']}[bot]"
            else:
                gh = self._gh("_/_")
                self._login = str(self._call(lambda: gh.get_user().login))
        return self._login

    def budget(self, repo: str) -> Budget | None:
        """The hourly call budget of the installation (or token) serving `owner/name`, as
        GitHub's last answer to it stated it; None before any answer stated one."""
        with self._lock:
            client = self._clients.get(self.budget_key(repo))
        return None if client is None else _stated(client)

    def budgets(self) -> dict[str, Budget]:
        """Every budget GitHub has stated to this client: by installation's owner, or
        `token`."""
        with self._lock:
            clients = dict(self._clients)
        stated = {key: _stated(client) for key, client in clients.items()}
        return {key: budget for key, budget in sorted(stated.items()) if budget is not None}

    @property
    def app_mode(self) -> bool:
        """Running as a GitHub App: jobs are check runs (only Apps may write them)."""
        return self._token is None

    def app_get(self, path: str) -> Any:
        """GET an App-level path (`/app`, `/app/hook/config`, `/app/hook/deliveries`) with the
        App's own JWT: what the doctor asks of GitHub about the App itself."""
        if self._app_auth is None:
            raise ValueError("not a GitHub App: App paths need its id and private key")
        integration = self._integration()
        _, data = self._call(lambda: integration.requester.requestJsonAndCheck("GET", path))
        return data
