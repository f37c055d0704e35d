"""Read and write the local git repositories behind sandbox repositories (argv only, no shell)."""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

SHA_RE = re.compile(r"^[0-9a-f]{40}$")


class GitError(Exception):
    """A git command failed or a revision does not resolve."""


@dataclass(frozen=True)
class CommitInfo:
    """What GitHub's commit JSON needs from one commit."""

    sha: str
    tree: str
    parents: tuple[str, ...]
    author_name: str
    author_email: str
    author_date: str
    committer_name: str
    committer_email: str
    committer_date: str
    message: str


def _git(git_path: str | Path, *args: str) -> str:
    proc = subprocess.run(
        ["git", "-C", str(git_path), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
    )
    if proc.returncode != 0:
        raise GitError(f"git {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc.stdout


def check_repository(git_path: str | Path) -> None:
    """Raise GitError unless `git_path` is a git repository (bare or not)."""
    if not Path(git_path).is_dir():
        raise GitError(f"{git_path} is not a directory")
    _git(git_path, "rev-parse", "--git-dir")


def resolve(git_path: str | Path, rev: str) -> str:
    """The full commit SHA that `rev` (branch, tag, SHA or prefix) names."""
    if rev.startswith("-") or not rev:
        raise GitError(f"bad revision {rev!r}")
    out = _git(
        git_path, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}"
    )
    sha = out.strip()
    if not SHA_RE.match(sha):
        raise GitError(f"{rev!r} does not name a commit")
    return sha


def is_branch(git_path: str | Path, name: str) -> bool:
    """Whether refs/heads/<name> exists."""
    if name.startswith("-") or not name:
        return False
    try:
        _git(git_path, "show-ref", "--verify", "--quiet", f"refs/heads/{name}")
    except GitError:
        return False
    return True


def update_ref(git_path: str | Path, ref: str, sha: str) -> None:
    """Point `ref` (e.g. refs/pull/3/head) at `sha`."""
    if not ref.startswith("refs/") or not SHA_RE.match(sha):
        raise GitError(f"refusing to set {ref!r} to {sha!r}")
    _git(git_path, "update-ref", ref, sha)


def commit_info(git_path: str | Path, sha: str) -> CommitInfo:
    """Author, committer, parents, tree and message of one commit."""
    fmt = "%H%x00%T%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B"
    out = _git(git_path, "show", "-s", f"--format={fmt}", "--end-of-options", sha)
    parts = out.split("\x00")
    if len(parts) < 10:
        raise GitError(f"unexpected git show output for {sha}")
    return CommitInfo(
        sha=parts[0],
        tree=parts[1],
        parents=tuple(parts[2].split()),
        author_name=parts[3],
        author_email=parts[4],
        author_date=parts[5],
        committer_name=parts[6],
        committer_email=parts[7],
        committer_date=parts[8],
        message="\x00".join(parts[9:]).rstrip("\n"),
    )


def count_commits(git_path: str | Path, base: str, head: str) -> int:
    """How many commits `head` has that `base` lacks (0 when git cannot tell)."""
    try:
        return int(_git(git_path, "rev-list", "--count", f"{base}..{head}").strip() or 0)
    except (GitError, ValueError):
        return 0


def changed_files(git_path: str | Path, base: str, head: str) -> list[tuple[str, int, int]]:
    """(path, lines added, lines removed) of each file `head` changes against `base`; binary
    files count 0 lines."""
    out = _git(git_path, "diff", "--numstat", "--end-of-options", base, head)
    files = []
    for line in out.splitlines():
        added, removed, path = line.split("\t", 2)
        files.append((path, int(added) if added.isdigit() else 0,
                      int(removed) if removed.isdigit() else 0))  # fmt: skip
    return files


def diff(git_path: str | Path, base: str, head: str, limit: int = 200_000) -> str:
    """The unified diff of `head` against `base`, cut at `limit` characters."""
    return _git(git_path, "diff", "--end-of-options", base, head)[:limit]


@dataclass(frozen=True)
class TreeEntry:
    """One entry of a tree: `kind` blob, tree or commit (a submodule); `size` for blobs."""

    mode: str
    kind: str
    sha: str
    size: int | None
    name: str

    @property
    def is_symlink(self) -> bool:
        return self.mode == "120000"


def _git_bytes(git_path: str | Path, *args: str) -> bytes:
    proc = subprocess.run(
        ["git", "-C", str(git_path), *args], capture_output=True, check=False, timeout=30
    )
    if proc.returncode != 0:
        why = proc.stderr.decode("utf-8", "replace").strip() or proc.returncode
        raise GitError(f"git {' '.join(args)}: {why}")
    return proc.stdout


def tree_entries(git_path: str | Path, tree: str) -> list[TreeEntry]:
    """The entries of the tree object `tree` (a SHA), names as git stores them (undecodable
    bytes replaced)."""
    if not SHA_RE.match(tree):
        raise GitError(f"not a tree SHA: {tree!r}")
    out = _git_bytes(git_path, "ls-tree", "-z", "--long", "--end-of-options", tree)
    entries = []
    for record in out.split(b"\0"):
        if not record:
            continue
        meta, _, name = record.partition(b"\t")
        mode, kind, sha, size = meta.decode().split()
        entries.append(
            TreeEntry(mode, kind, sha, int(size) if size.isdigit() else None,
                      name.decode("utf-8", "replace"))
        )  # fmt: skip
    return entries


def entry_at(git_path: str | Path, commit: str, path: str) -> TreeEntry | None:
    """The entry at `path` in `commit`'s tree, walked one exact name at a time (no pathspec,
    no `..`), or None; the root ("") is the commit's tree, named ""."""
    parts = [p for p in path.split("/") if p]
    if any(p in (".", "..") for p in parts):
        return None
    root = _git(git_path, "rev-parse", "--verify", "--end-of-options", f"{commit}^{{tree}}")
    entry = TreeEntry("040000", "tree", root.strip(), None, "")
    for part in parts:
        if entry.kind != "tree":
            return None
        found = [e for e in tree_entries(git_path, entry.sha) if e.name == part]
        if not found:
            return None
        entry = found[0]
    return entry


def blob(git_path: str | Path, sha: str) -> bytes:
    """The bytes of the blob `sha`."""
    if not SHA_RE.match(sha):
        raise GitError(f"not a blob SHA: {sha!r}")
    return _git_bytes(git_path, "cat-file", "blob", sha)
