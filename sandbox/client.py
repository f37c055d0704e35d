"""`SandboxAdmin`: a typed client of the sandbox's admin API, for tests and the demo."""

from __future__ import annotations

from types import TracebackType
from typing import Any, Literal

import httpx

Json = dict[str, Any]
Permission = Literal["none", "read", "triage", "write", "maintain", "admin"]


class SandboxAdminError(Exception):
    """The admin API refused a call; `status` and `message` say why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


class SandboxAdmin:
    """Drive a running sandbox at `base_url` (e.g. http://127.0.0.1:8081)."""

    def __init__(self, base_url: str, *, timeout: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = httpx.Client(base_url=f"{self.base_url}/_sandbox", timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SandboxAdmin:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _call(
        self,
        method: str,
        path: str,
        json: Json | None = None,
        *,
        timeout: float | None = None,
        params: dict[str, Any] | None = None,
        ok: tuple[int, ...] = (),
    ) -> Any:
        kwargs: dict[str, Any] = {"json": json, "params": params}
        if timeout is not None:
            kwargs["timeout"] = timeout
        response = self._http.request(method, path, **kwargs)
        if response.status_code >= 400 and response.status_code not in ok:
            try:
                message = response.json().get("message", response.text)
            except ValueError:
                message = response.text
            raise SandboxAdminError(response.status_code, str(message))
        if response.status_code == 204 or not response.content:
            return None
        return response.json()

    # -- the world ----------------------------------------------------------------------

    def create_user(
        self, login: str, type: Literal["User", "Bot", "Organization"] = "User"
    ) -> Json:
        """Create (or get) a user; `type="Bot"` for bot accounts."""
        return self._call("POST", "/users", {"login": login, "type": type})

    def create_token(self, login: str, token: str | None = None) -> str:
        """A token that authenticates as `login` (`Authorization: token X`)."""
        return str(self._call("POST", "/tokens", {"login": login, "token": token})["token"])

    def register_app(
        self,
        app_id: int,
        public_key_pem: str,
        *,
        slug: str = "ondemand",
        installation_id: int | None = None,
        account: str | None = None,
    ) -> Json:
        """Register a GitHub App and one installation (on `account`, or every repository).
        Returns {app_id, slug, bot_login, installation_id}."""
        return self._call(
            "POST",
            "/apps",
            {
                "app_id": app_id,
                "public_key_pem": public_key_pem,
                "slug": slug,
                "installation_id": installation_id,
                "account": account,
            },
        )

    def set_installation_permissions(
        self, installation_id: int, permissions: dict[str, str], *, user: str | None = None
    ) -> Json:
        """Replace what the installation's owner accepted (`{"contents": "read", ...}`); when it
        grants anything new, `installation` `new_permissions_accepted` is delivered. Returns
        {installation_id, permissions, event}."""
        body = {"permissions": permissions, "user": user}
        return self._call("POST", f"/installations/{installation_id}/permissions", body)

    def create_repo(
        self,
        owner: str,
        name: str,
        git_path: str,
        *,
        default_branch: str = "main",
        private: bool = False,
    ) -> Json:
        """A repository backed by the local git repository at `git_path` (its clone_url)."""
        return self._call(
            "POST",
            "/repos",
            {
                "owner": owner,
                "name": name,
                "git_path": git_path,
                "default_branch": default_branch,
                "private": private,
            },
        )

    def set_permission(self, repo: str, login: str, permission: Permission) -> None:
        """Make `login` a collaborator on `repo` ("owner/name") with `permission`."""
        self._call(
            "POST", f"/repos/{repo}/collaborators", {"login": login, "permission": permission}
        )

    def create_team(
        self, org: str, slug: str, members: list[str], maintainers: list[str] | None = None
    ) -> Json:
        return self._call(
            "POST",
            "/teams",
            {"org": org, "slug": slug, "members": members, "maintainers": maintainers or []},
        )

    # -- acting as people ---------------------------------------------------------------

    def open_pull(
        self,
        repo: str,
        *,
        head: str,
        user: str,
        base: str | None = None,
        title: str = "Sandbox pull request",
        body: str = "",
    ) -> Json:
        """Open a PR from `head` (branch or SHA); delivers `pull_request` `opened`.
        Returns the PR's JSON (`number`, `head.sha`, ...)."""
        return self._call(
            "POST",
            f"/repos/{repo}/pulls",
            {"head": head, "base": base, "title": title, "body": body, "user": user},
        )

    def open_issue(
        self, repo: str, *, user: str, title: str = "Sandbox issue", body: str = ""
    ) -> Json:
        """A plain issue (no `pull_request`); comments on it go out like any other."""
        return self._call(
            "POST", f"/repos/{repo}/issues", {"title": title, "body": body, "user": user}
        )

    def push(self, repo: str, number: int, sha: str, user: str | None = None) -> Json:
        """Move the PR head to `sha` (branch or SHA); delivers `synchronize`."""
        return self._call("POST", f"/repos/{repo}/pulls/{number}/push", {"sha": sha, "user": user})

    def merge_queue(self, repo: str, number: int, user: str | None = None) -> Json:
        """Add the PR to its base's merge queue; delivers `merge_group` `checks_requested` and
        answers the group (`head_sha`, `head_ref`, `base_sha`, `base_ref`)."""
        return self._call("POST", f"/repos/{repo}/pulls/{number}/merge-queue", {"user": user})

    def destroy_merge_group(
        self, repo: str, number: int, head_sha: str, reason: str = "dequeued"
    ) -> Json:
        """The PR's merge group `head_sha` is gone; delivers `merge_group` `destroyed`."""
        body = {"head_sha": head_sha, "reason": reason}
        return self._call("POST", f"/repos/{repo}/pulls/{number}/merge-queue/destroy", body)

    def close_pull(
        self, repo: str, number: int, user: str | None = None, merged: bool = False
    ) -> Json:
        """Close the PR; delivers `pull_request` `closed`."""
        return self._call(
            "POST", f"/repos/{repo}/pulls/{number}/close", {"user": user, "merged": merged}
        )

    def merge_pull(
        self, repo: str, number: int, user: str | None = None, method: str = "merge"
    ) -> Json:
        """Merge the PR onto its base branch (a merge commit, or `squash`); delivers
        `pull_request` `closed` and the base branch's `push`. Returns {sha, merged, pull}."""
        body = {"user": user, "method": method}
        return self._call("POST", f"/repos/{repo}/pulls/{number}/merge", body)

    def issues(self, repo: str) -> list[Json]:
        """The repository's plain issues (no pull requests), oldest first."""
        return list(self._call("GET", f"/repos/{repo}/issues"))

    def comment(self, repo: str, number: int, user: str, body: str) -> Json:
        """Post a comment as `user`; delivers `issue_comment` `created`. Returns its JSON."""
        return self._call(
            "POST", f"/repos/{repo}/issues/{number}/comments", {"user": user, "body": body}
        )

    def edit_comment(self, repo: str, comment_id: int, body: str, user: str | None = None) -> Json:
        """Edit a comment; delivers `issue_comment` `edited`."""
        return self._call(
            "PATCH", f"/repos/{repo}/issues/comments/{comment_id}", {"body": body, "user": user}
        )

    def delete_comment(self, repo: str, comment_id: int, user: str | None = None) -> None:
        """Delete a comment; delivers `issue_comment` `deleted`."""
        params = {"user": user} if user else None
        self._call("DELETE", f"/repos/{repo}/issues/comments/{comment_id}", params=params)

    # -- webhook, deliveries, faults ----------------------------------------------------

    def set_webhook(
        self,
        url: str | None,
        secret: str | None = None,
        content_type: Literal["json", "form"] = "json",
    ) -> Json:
        """Deliver webhooks to `url` signed with `secret` (None: stop delivering), as JSON or
        form-encoded (`payload=<json>`, GitHub's default for repository webhooks)."""
        body = {"url": url, "secret": secret, "content_type": content_type}
        return self._call("PUT", "/webhook", body)

    def hold_deliveries(self) -> None:
        """Keep new deliveries back until `release_deliveries`."""
        self._call("POST", "/deliveries/hold")

    def release_deliveries(
        self, *, reversed_order: bool = False, duplicate: bool = False
    ) -> list[str]:
        """Send the held deliveries, reversed or as made, each once or twice; their ids in the
        order sent."""
        body = {"order": "reversed" if reversed_order else "as-sent", "duplicate": duplicate}
        return list(self._call("POST", "/deliveries/release", body))

    def deliveries(self) -> list[Json]:
        """Every delivery: id, event, action, status_code, attempts, headers, payload."""
        return list(self._call("GET", "/deliveries"))

    def redeliver(self, delivery_id: str) -> Json:
        """Send a delivery again with the same `X-GitHub-Delivery`."""
        return self._call("POST", f"/deliveries/{delivery_id}/redeliver")

    def inject_fault(
        self,
        status: Literal[403, 429, 500, 502, 503],
        count: int = 1,
        *,
        path_prefix: str | None = None,
        retry_after: int | None = None,
        method: str | None = None,
        kind: Literal["primary", "secondary"] = "primary",
        applied: bool = False,
    ) -> Json:
        """Answer the next `count` matching REST calls with `status` (403/429: rate limit; a 403
        of `kind` secondary names the limit only in its message, as GitHub often does); with
        `applied`, each call is carried out first and only its answer is lost."""
        return self._call(
            "POST",
            "/faults",
            {
                "status": status,
                "count": count,
                "path_prefix": path_prefix,
                "retry_after": retry_after,
                "method": method,
                "kind": kind,
                "applied": applied,
            },
        )

    def clear_faults(self) -> None:
        self._call("DELETE", "/faults")

    def set_rate_limit(self, limit: int, enforced: bool = True) -> Json:
        """Each login's REST calls an hour; with `enforced`, calls past it get GitHub's 403
        (no requests left, the window's reset) until the window ends."""
        return self._call("PUT", "/rate-limit", {"limit": limit, "enforced": enforced})

    # -- reading back ---------------------------------------------------------------------

    def state(self) -> Json:
        """The whole store: users, repos, pulls, comments (with history and reactions),
        statuses, check_runs, deliveries, faults, webhook, apps, installations, api_calls."""
        return dict(self._call("GET", "/state"))

    def comments(self, repo: str, number: int, *, include_deleted: bool = False) -> list[Json]:
        """The comments on PR `number`, oldest first, with `history` and `reactions`."""
        return [
            c
            for c in self.state()["comments"]
            if c["repo"] == repo
            and c["issue_number"] == number
            and (include_deleted or not c["deleted"])
        ]

    def statuses(self, repo: str, sha: str) -> list[Json]:
        """Commit statuses set on `sha`, oldest first."""
        return [s for s in self.state()["statuses"] if s["repo"] == repo and s["sha"] == sha]

    def wait(self, what: str, *, timeout: float = 10.0, **conditions: Any) -> list[Json]:
        """Block until the condition of GET /_sandbox/wait holds; returns its items.
        `what`: comment | status | reaction | deliveries | change. Raises TimeoutError."""
        params = {k: v for k, v in conditions.items() if v is not None}
        params["for"] = what
        params["timeout"] = timeout
        data = self._call("GET", "/wait", params=params, timeout=timeout + 10, ok=(408,))
        if not data["ok"]:
            raise TimeoutError(f"sandbox: no {what} matching {conditions} within {timeout}s")
        return list(data["items"])

    def wait_for_comment(
        self,
        repo: str,
        number: int,
        *,
        user: str | None = None,
        contains: str | None = None,
        timeout: float = 10.0,
    ) -> Json:
        """The first comment on the PR by `user` whose body contains `contains`."""
        items = self.wait(
            "comment", repo=repo, number=number, user=user, contains=contains, timeout=timeout
        )
        return items[0]

    def wait_for_deliveries(self, count: int = 1, timeout: float = 10.0) -> list[Json]:
        """Wait until at least `count` deliveries exist and each has been attempted."""
        return self.wait("deliveries", count=count, timeout=timeout)
