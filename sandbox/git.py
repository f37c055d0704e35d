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
