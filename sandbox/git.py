"""Read and write the local git repositories behind sandbox repositories (argv only, no shell)."""

from __future__ import annotations

import functools
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


def merge_commit(git_path: str | Path, base: str, head: str, message: str) -> str:
    """A merge commit of `head` onto `base` (a merge queue's group head), made without a work
    tree; GitError when they conflict."""
    if not (SHA_RE.match(base) and SHA_RE.match(head)):
        raise GitError(f"refusing to merge {head!r} onto {base!r}")
    tree = _git(git_path, "merge-tree", "--write-tree", base, head).split("\n")[0].strip()
    out = _git(git_path, "commit-tree", tree, "-p", base, "-p", head, "-m", message)
    return out.strip()


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


@dataclass(frozen=True)
class FileChange:
    """One file of a pull request as GitHub lists it: `status` added, removed, modified,
    renamed, copied or changed (its type); `previous` the old path of a rename or copy."""

    path: str
    status: str
    sha: str  # the blob at the head ("0" * 40 for a removed file)
    additions: int
    deletions: int
    previous: str | None = None


_STATUS = {"A": "added", "D": "removed", "M": "modified", "R": "renamed", "C": "copied",
           "T": "changed"}  # fmt: skip


@functools.lru_cache(maxsize=256)
def pull_files(git_path: str, base: str, head: str) -> tuple[FileChange, ...]:
    """The files `head` changes since its merge base with `base` (GitHub's three dots), renames
    found, in path order. Cached: a commit pair's answer never changes."""
    spec = f"{base}...{head}"
    raw = _git(git_path, "diff", "-z", "--raw", "--no-abbrev", "-M", "--end-of-options", spec)
    numstat = _git(git_path, "diff", "-z", "--numstat", "-M", "--end-of-options", spec)
    counts: dict[str, tuple[int, int]] = {}
    fields = numstat.split("\0")
    i = 0
    while i < len(fields) - 1:
        added, removed, path = fields[i].split("\t", 2)
        if path == "":  # a rename: the old and the new path follow
            path, i = fields[i + 2], i + 3
        else:
            i += 1
        lines = (added, removed)  # "-" for a binary file
        counts[path] = (int(lines[0]) if lines[0].isdigit() else 0,
                        int(lines[1]) if lines[1].isdigit() else 0)  # fmt: skip
    changes = []
    fields = raw.split("\0")
    i = 0
    while i < len(fields) - 1:
        meta = fields[i].lstrip(":").split()
        letter, sha = meta[4][0], meta[3]
        if letter in "RC":
            previous, path, i = fields[i + 1], fields[i + 2], i + 3
        else:
            previous, path, i = None, fields[i + 1], i + 2
        added, removed = counts.get(path, (0, 0))
        changes.append(
            FileChange(path, _STATUS.get(letter, "modified"), sha, added, removed, previous)
        )
    return tuple(sorted(changes, key=lambda c: c.path))


MAX_PATCH_CHARS = 64 * 1024  # a file's patch past this is left out, as GitHub leaves out large ones


@functools.lru_cache(maxsize=64)
def pull_patches(git_path: str, base: str, head: str) -> dict[str, str]:
    """Each file's patch as the files API gives it (its hunks, three lines of context, no
    header), by its path at the head (the old path for a removal); none for a binary file or
    one past MAX_PATCH_CHARS. One `git diff` for the whole pull request; cached."""
    text = _git(
        git_path, "-c", "core.quotePath=false", "diff", "-M", "--no-color",
        "--src-prefix=a/", "--dst-prefix=b/", "--end-of-options", f"{base}...{head}",
    )  # fmt: skip
    patches: dict[str, str] = {}
    path: str | None = None
    hunks: list[str] = []

    def close() -> None:
        body = "\n".join(hunks)
        if path is not None and hunks and len(body) <= MAX_PATCH_CHARS:
            patches[path] = body

    for line in text.split("\n"):
        if line.startswith("diff --git "):
            close()
            path, hunks = None, []
        elif hunks or line.startswith("@@"):
            hunks.append(line)
        elif line.startswith("--- a/") and path is None:
            path = line[6:]  # kept for a removal, replaced by the new path otherwise
        elif line.startswith("+++ b/"):
            path = line[6:]
    close()
    return patches


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


ZERO_SHA = "0" * 40


def branch_heads(git_path: str | Path) -> dict[str, str]:
    """Every branch and the commit it points at (`main` → SHA)."""
    out = _git(git_path, "for-each-ref", "--format=%(refname:strip=2) %(objectname)", "refs/heads")
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def commits_between(
    git_path: str | Path, before: str, after: str, limit: int = 20
) -> list[CommitInfo]:
    """The commits `after` has that `before` lacks, oldest first, at most the newest `limit`
    (GitHub's push event lists 20); `before` all zeros (a new branch): `after` alone."""
    if not SHA_RE.match(after):
        raise GitError(f"not a commit SHA: {after!r}")
    if before == ZERO_SHA or not SHA_RE.match(before):
        shas = [after]
    else:
        out = _git(git_path, "rev-list", "--reverse", "--first-parent", f"{before}..{after}")
        shas = out.split()[-limit:]
    return [commit_info(git_path, sha) for sha in shas]


def commit_paths(git_path: str | Path, info: CommitInfo) -> dict[str, list[str]]:
    """The paths a commit added, removed and modified against its first parent, as a push
    event's commit lists them."""
    found: dict[str, list[str]] = {"added": [], "removed": [], "modified": []}
    if not info.parents:
        return found
    out = _git(git_path, "diff-tree", "-r", "-z", "--name-status", "--no-renames",
               info.parents[0], info.sha)  # fmt: skip
    fields = out.split("\0")
    for letter, path in zip(fields[::2], fields[1::2], strict=False):
        kind = {"A": "added", "D": "removed"}.get(letter[:1], "modified")
        found[kind].append(path)
    return found


def commit_tree(git_path: str | Path, tree: str, parent: str, message: str) -> str:
    """A commit of `tree` with the one parent `parent` (a squash merge), made without a work
    tree."""
    if not (SHA_RE.match(tree) and SHA_RE.match(parent)):
        raise GitError(f"refusing to commit {tree!r} onto {parent!r}")
    return _git(git_path, "commit-tree", tree, "-p", parent, "-m", message).strip()


def move_branch(git_path: str | Path, branch: str, sha: str) -> None:
    """Point `branch` at `sha`, a descendant of its tip; where a work tree has it checked out,
    by a fast-forward there, so that tree and its index follow (a clean one)."""
    if not SHA_RE.match(sha):
        raise GitError(f"refusing to set {branch!r} to {sha!r}")
    bare = _git(git_path, "rev-parse", "--is-bare-repository").strip() == "true"
    try:
        current = _git(git_path, "symbolic-ref", "--quiet", "HEAD").strip()
    except GitError:
        current = ""  # a detached HEAD
    if not bare and current == f"refs/heads/{branch}":
        _git(git_path, "merge", "--ff-only", "--quiet", sha)
        return
    update_ref(git_path, f"refs/heads/{branch}", sha)
