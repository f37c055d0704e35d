"""The client's reads of a pull request and a repository: the pull request, its files (every
page), a user's permission, a file's text at a ref and the commit a ref names. A part of the
one client (`GitHubClient` inherits it), kept apart so each file stays small; every call goes
through the client's `_request` or `_call`, with its pauses, budget and error mapping."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from urllib.parse import quote, urlencode

from service.github.errors import FileTooLarge, GitHubError
from service.github.transport import Transport


@dataclass(frozen=True)
class PullInfo:
    number: int
    state: str
    head_sha: str
    head_ref: str
    base_ref: str
    base_sha: str
    clone_url: str
    changed_files: int = 0  # all of them, also past what the files API lists
    author: str = ""
    private: bool = False  # git fetches it with a token


@dataclass(frozen=True)
class PullFile:
    """One file of a pull request as the files API lists it; `patch` None when GitHub gives
    none (a binary file, a diff too large)."""

    filename: str
    status: str
    previous_filename: str | None = None
    patch: str | None = None
    changes: int = 0  # lines added and removed


FILES_PAGE = 100  # the files API's largest page
FILES_CAP = 3000  # GitHub lists at most this many files of a pull request


class ReadCalls(Transport):
    """Pull requests, permissions and contents, for `GitHubClient`."""

    def pull(self, repo: str, number: int) -> PullInfo:
        """The pull request as GitHub has it now."""

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
                changed_files=int(pr.changed_files or 0),
                author=pr.user.login if pr.user else "",
                private=bool(pr.base.repo.private),
            )

        return self._call(read, "pull_requests:read", repo)

    def pull_files(self, repo: str, number: int) -> list[PullFile]:
        """The pull request's files, every page of them: at most FILES_CAP, as GitHub lists
        no more (the pull request's `changed_files` counts them all)."""
        found: list[PullFile] = []
        for page in range(1, FILES_CAP // FILES_PAGE + 1):
            query = urlencode({"per_page": FILES_PAGE, "page": page})
            path = f"/repos/{repo}/pulls/{int(number)}/files?{query}"
            data = self._request(repo, "GET", path, need="pull_requests:read")
            items = data if isinstance(data, list) else []
            found += [
                PullFile(
                    filename=str(item["filename"]),
                    status=str(item.get("status") or "modified"),
                    previous_filename=item.get("previous_filename"),
                    patch=item.get("patch"),
                    changes=int(item.get("changes") or 0),
                )
                for item in items
                if isinstance(item, dict) and item.get("filename")
            ]
            if len(items) < FILES_PAGE:
                break
        return found

    def permission(self, repo: str, login: str) -> str:
        """The user's permission on `repo` ("none" when not a collaborator)."""

        def read() -> str:
            return str(self._repo(repo).get_collaborator_permission(login))

        try:
            return self._call(read, "metadata:read", repo)
        except GitHubError as exc:
            if exc.status == 404:
                return "none"
            raise

    def file_at(self, repo: str, path: str, ref: str) -> str | None:
        """The text of the file at `path` on `ref` (a branch, tag or SHA), decoded as UTF-8
        with replacement; None when GitHub answers 404 (no such path or ref) or `path` is not
        a file (a directory, a submodule). A file over 1 MB, whose content GitHub leaves out,
        raises FileTooLarge with its size; other failures are GitHubError as for every call."""
        url = f"/repos/{repo}/contents/{quote(path)}?{urlencode({'ref': ref})}"
        try:
            data = self._request(repo, "GET", url, need="contents:read")
        except GitHubError as exc:
            if exc.status == 404:
                return None
            raise
        if not isinstance(data, dict) or data.get("type") != "file":
            return None
        if data.get("encoding") != "base64":  # "none": GitHub leaves out content past 1 MB
            size = int(data.get("size") or 0)
            raise FileTooLarge(
                f"{path} on {ref} is {size:,} bytes: GitHub's contents API returns up to 1 MB",
                size,
            )
        return base64.b64decode(str(data.get("content") or "")).decode("utf-8", "replace")

    def commit_sha(self, repo: str, ref: str) -> str | None:
        """The commit `ref` (a branch, tag or SHA) names, or None when GitHub knows none (404,
        or 422 for a malformed one)."""
        try:
            data = self._request(repo, "GET", f"/repos/{repo}/commits/{quote(ref, safe='')}",
                                 need="contents:read")  # fmt: skip
        except GitHubError as exc:
            if exc.status in (404, 422):
                return None
            raise
        sha = data.get("sha") if isinstance(data, dict) else None
        return str(sha) if sha else None
