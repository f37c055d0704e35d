"""GitHub's repository contents (`GET /repos/{o}/{r}/contents/{path}?ref=`) read from the git
repository behind a sandbox repository, in GitHub's shapes: a file is an object with its
content in base64 (left out, `encoding: "none"`, past 1 MB, as GitHub does); a directory is a
list of entries (submodules listed as `file`, as GitHub does for compatibility); a symlink to
a file in the repository reads as that file, any other is an object with its `target`."""

from __future__ import annotations

import base64
import posixpath
from typing import Any
from urllib.parse import quote

from sandbox import git
from sandbox.state import Repo, SandboxError

Json = dict[str, Any]
MAX_CONTENT_BYTES = 1024 * 1024  # GitHub returns content up to 1 MB
MAX_DIR_ENTRIES = 1000  # GitHub lists at most 1,000 entries of a directory
_B64_LINE = 60  # GitHub wraps the base64 content at 60 characters


def contents(base: str, repo: Repo, path: str, ref: str | None) -> Json | list[Json]:
    """What GitHub answers for `path` at `ref` (branch, tag or SHA; None or "": the default
    branch); SandboxError 404 for an unknown ref or a missing path."""
    ref = ref or repo.default_branch
    try:
        commit = git.resolve(repo.git_path, ref)
    except git.GitError as exc:
        raise SandboxError(404, f"No commit found for the ref {ref}") from exc
    path = "/".join(p for p in path.split("/") if p)
    entry = git.entry_at(repo.git_path, commit, path)
    if entry is None:
        raise SandboxError(404, "Not Found")
    links = _Links(base, repo, ref)
    if entry.kind == "tree":
        listed = git.tree_entries(repo.git_path, entry.sha)[:MAX_DIR_ENTRIES]
        return [links.entry(e, posixpath.join(path, e.name), listing=True) for e in listed]
    if entry.is_symlink:
        target = git.blob(repo.git_path, entry.sha).decode("utf-8", "replace")
        resolved = _in_repo(posixpath.dirname(path), target)
        pointed = git.entry_at(repo.git_path, commit, resolved) if resolved else None
        if pointed is not None and pointed.kind == "blob" and not pointed.is_symlink:
            return links.file(pointed, resolved or "")
        return {**links.entry(entry, path), "target": target}
    if entry.kind == "blob":
        return links.file(entry, path)
    return {**links.entry(entry, path), "submodule_git_url": None}


def _in_repo(directory: str, target: str) -> str | None:
    """A symlink's target as a path from the repository's root, or None when it leaves it."""
    if target.startswith("/"):
        return None
    joined = posixpath.normpath(posixpath.join(directory, target))
    return None if joined == ".." or joined.startswith("../") or joined == "." else joined


class _Links:
    """The URLs GitHub gives each entry, at one ref."""

    def __init__(self, base: str, repo: Repo, ref: str) -> None:
        self.base, self.repo, self.ref = base, repo, ref
        self.api = f"{base}/repos/{repo.full_name}"

    def entry(self, entry: git.TreeEntry, path: str, listing: bool = False) -> Json:
        """An entry without its content. In a listing a submodule is a `file`, as on GitHub."""
        if entry.kind == "tree":
            kind = "dir"
        elif entry.kind == "commit":
            kind = "file" if listing else "submodule"
        else:
            kind = "symlink" if entry.is_symlink else "file"
        quoted = quote(path)
        url = f"{self.api}/contents/{quoted}?ref={quote(self.ref, safe='')}"
        git_kind = "blobs" if entry.kind == "blob" else "trees"
        git_url = f"{self.api}/git/{git_kind}/{entry.sha}"
        view = "tree" if entry.kind == "tree" else "blob"
        html_url = f"{self.base}/{self.repo.full_name}/{view}/{quote(self.ref)}/{quoted}"
        download_url = (
            f"{self.base}/{self.repo.full_name}/raw/{quote(self.ref)}/{quoted}"
            if entry.kind == "blob"
            else None
        )
        return {
            "type": kind,
            "size": entry.size or 0,
            "name": posixpath.basename(path),
            "path": path,
            "sha": entry.sha,
            "url": url,
            "git_url": git_url,
            "html_url": html_url,
            "download_url": download_url,
            "_links": {"self": url, "git": git_url, "html": html_url},
        }

    def file(self, entry: git.TreeEntry, path: str) -> Json:
        """A file with its content: base64 in lines of 60, or none past 1 MB."""
        data = self.entry(entry, path)
        if (entry.size or 0) > MAX_CONTENT_BYTES:
            return {**data, "content": "", "encoding": "none"}
        raw = base64.b64encode(git.blob(self.repo.git_path, entry.sha)).decode("ascii")
        lines = [raw[i : i + _B64_LINE] + "\n" for i in range(0, len(raw), _B64_LINE)]
        return {**data, "content": "".join(lines), "encoding": "base64"}
