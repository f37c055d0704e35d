"""The client's writes to a pull request and a commit: reactions, comments (and finding the
bot's own again by its marker), check runs and commit statuses. A part of the one client
(`GitHubClient` inherits it), kept apart so each file stays small; every call goes through the
client's `_request` or `_call`, with its pauses, budget and error mapping."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from service.github.transport import Transport


class PostCalls(Transport):
    """Comments, reactions, check runs and statuses, for `GitHubClient`."""

    def add_reaction(self, repo: str, comment_id: int, content: str) -> None:
        path = f"/repos/{repo}/issues/comments/{comment_id}/reactions"
        self._request(repo, "POST", path, {"content": content}, need="issues:write")

    def create_comment(self, repo: str, number: int, body: str) -> int:
        path = f"/repos/{repo}/issues/{number}/comments"
        return int(self._request(repo, "POST", path, {"body": body}, need="issues:write")["id"])

    def edit_comment(self, repo: str, comment_id: int, body: str) -> None:
        path = f"/repos/{repo}/issues/comments/{comment_id}"
        self._request(repo, "PATCH", path, {"body": body}, need="issues:write")

    def find_comment(self, repo: str, number: int, marker: str) -> int | None:
        """The id of the PR's comment by this bot whose body starts with `marker` (anyone may
        write a marker: another's comment is never taken for the bot's own)."""
        me = self.login()

        def scan() -> int | None:
            for comment in self._repo(repo).get_issue(number).get_comments():
                if comment.body.startswith(marker) and comment.user.login == me:
                    return int(comment.id)
            return None

        return self._call(scan, "issues:read", repo)

    def create_check_run(self, repo: str, body: dict[str, Any]) -> int:
        data = self._request(repo, "POST", f"/repos/{repo}/check-runs", body, need="checks:write")
        return int(data["id"])

    def update_check_run(self, repo: str, run_id: int, body: dict[str, Any]) -> None:
        path = f"/repos/{repo}/check-runs/{run_id}"
        self._request(repo, "PATCH", path, body, need="checks:write")

    def find_check_run(self, repo: str, sha: str, name: str, external_id: str) -> int | None:
        """This App's check run `name` on `sha` made for `external_id` (a create retried
        after an answer that never came), or None."""
        query = urlencode({"check_name": name, "filter": "all"})
        path = f"/repos/{repo}/commits/{sha}/check-runs?{query}"
        data = self._request(repo, "GET", path, need="checks:read")
        for run in data.get("check_runs", []) if isinstance(data, dict) else []:
            if str(run.get("external_id")) == external_id:
                return int(run["id"])
        return None

    def latest_status(self, repo: str, sha: str, context: str) -> dict[str, Any] | None:
        """The newest commit status of `context` on `sha` (GitHub lists them newest first), or
        None: whether a create retried after an answer that never came already stands."""
        path = f"/repos/{repo}/commits/{sha}/statuses?per_page=100"
        data = self._request(repo, "GET", path, need="statuses:write")
        for status in data if isinstance(data, list) else []:
            if isinstance(status, dict) and status.get("context") == context:
                return status
        return None

    def create_status(
        self, repo: str, sha: str, state: str, description: str, context: str, target_url: str
    ) -> None:
        body = {
            "state": state,
            "description": description,
            "context": context,
            "target_url": target_url,
        }
        path = f"/repos/{repo}/statuses/{sha}"
        self._request(repo, "POST", path, body, need="statuses:write")
