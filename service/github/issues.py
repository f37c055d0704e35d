"""The client's calls for the default branch's own runs: issues (create, edit, find again by
the marker the bot wrote in them) and the pull requests a commit belongs to. A part of the
one client (`GitHubClient` inherits it), kept apart so each file stays small; every call goes
through the client's `_request`, with its pauses, budget and error mapping."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from service.github.transport import Transport

ISSUES_PAGE = 100
MAX_ISSUE_PAGES = 10  # a marker is looked for among the newest 1,000 issues of its label


@dataclass(frozen=True)
class CommitPull:
    """A pull request a commit belongs to: `merged` with the commit its merge made."""

    number: int
    state: str
    merged: bool
    merge_commit_sha: str | None


class IssueCalls(Transport):
    """Issues and a commit's pull requests, for `GitHubClient`."""

    def create_issue(self, repo: str, title: str, body: str, labels: list[str]) -> int:
        """A new issue; its number."""
        data = {"title": title, "body": body, "labels": labels}
        made = self._request(repo, "POST", f"/repos/{repo}/issues", data, need="issues:write")
        return int(made["number"])

    def edit_issue(self, repo: str, number: int, **fields: Any) -> None:
        """Change an issue's `title`, `body`, `state` (open, closed) or `state_reason`."""
        path = f"/repos/{repo}/issues/{int(number)}"
        self._request(repo, "PATCH", path, dict(fields), need="issues:write")

    def find_issue(self, repo: str, label: str, marker: str) -> int | None:
        """The number of this bot's issue with `label` whose body starts with `marker`, open
        or closed (a create retried after an answer that never came), or None."""
        me = self.login()
        for page in range(1, MAX_ISSUE_PAGES + 1):
            query = urlencode(
                {"state": "all", "labels": label, "per_page": ISSUES_PAGE, "page": page}
            )
            found = self._request(repo, "GET", f"/repos/{repo}/issues?{query}", need="issues:read")
            items = found if isinstance(found, list) else []
            for item in items:
                body = str(item.get("body") or "")
                author = (item.get("user") or {}).get("login")
                if "pull_request" not in item and body.startswith(marker) and author == me:
                    return int(item["number"])
            if len(items) < ISSUES_PAGE:
                break
        return None

    def commit_pulls(self, repo: str, sha: str) -> list[CommitPull]:
        """The pull requests `sha` belongs to (GitHub's `commits/{sha}/pulls`): the one whose
        merge made it, and those it heads."""
        path = f"/repos/{repo}/commits/{sha}/pulls?per_page=100"
        found = self._request(repo, "GET", path, need="pull_requests:read")
        return [
            CommitPull(
                number=int(item["number"]),
                state=str(item.get("state") or ""),
                merged=bool(item.get("merged_at")),
                merge_commit_sha=item.get("merge_commit_sha"),
            )
            for item in (found if isinstance(found, list) else [])
            if isinstance(item, dict) and item.get("number")
        ]

    def commit_parent(self, repo: str, sha: str) -> str | None:
        """The first parent of commit `sha` (what a night's run of an operator never run on
        the default branch compares with), or None for a root commit."""
        data = self._request(repo, "GET", f"/repos/{repo}/commits/{sha}", need="contents:read")
        parents = data.get("parents") if isinstance(data, dict) else None
        first = parents[0] if isinstance(parents, list) and parents else None
        return str(first["sha"]) if isinstance(first, dict) and first.get("sha") else None

    def merged_pull(self, repo: str, sha: str) -> int | None:
        """The pull request whose merge made `sha` (a push to the default branch), or None:
        a direct push."""
        pulls = self.commit_pulls(repo, sha)
        made = [p for p in pulls if p.merged and p.merge_commit_sha == sha]
        merged = made or [p for p in pulls if p.merged]
        return merged[0].number if merged else None
