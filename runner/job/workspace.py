"""Checkouts: one cached bare mirror per repository, and per job a fresh worktree at exactly the
pinned SHA (fetching the pull request's ref when the SHA is not yet local), removed afterwards.

Only git is run, with argv lists; the URL and SHA come from the service, the SHA is checked to
be hex before anything sees it.
"""

from __future__ import annotations

import shutil
from contextlib import suppress
from pathlib import Path

from ondemand.git import SHA, GitError, Mirrors, check_sha, git, locked

WorkspaceError = GitError  # what the runner calls a failed checkout

__all__ = ["WorkspaceError", "Workspaces", "git"]


class Workspaces(Mirrors):
    """Mirrors under `root/mirrors`, worktrees wherever the caller asks (the job's directory)."""

    def add_worktree(self, mirror: Path, sha: str, path: Path) -> Path:
        """A detached worktree of `mirror` at `sha` in `path` (replacing a stale one)."""
        check_sha(sha)
        with locked(mirror.with_suffix(".lock")):
            if path.exists():
                self._remove(mirror, path)
            git(["worktree", "prune"], cwd=mirror)
            git(["worktree", "add", "--detach", "--force", "--quiet", str(path), sha], cwd=mirror)
        return path

    def remove_worktree(self, mirror: Path, path: Path) -> None:
        with locked(mirror.with_suffix(".lock")):
            self._remove(mirror, path)

    def _remove(self, mirror: Path, path: Path) -> None:
        with suppress(WorkspaceError):
            git(["worktree", "remove", "--force", "--force", str(path)], cwd=mirror)
        shutil.rmtree(path, ignore_errors=True)
        git(["worktree", "prune"], cwd=mirror)

    def merge_base(self, mirror: Path, sha: str, base: str) -> str | None:
        """The merge base of `sha` and `base` (a SHA, or a branch name in the mirror)."""
        ref = base if SHA.match(base) else f"refs/heads/{base}"
        try:
            return git(["merge-base", sha, ref], cwd=mirror).strip() or None
        except WorkspaceError:
            return None

    def changed_paths(self, mirror: Path, old: str, new: str) -> list[str] | None:
        """The paths that differ between two commits of `mirror`; None where either is not a
        commit there."""
        try:
            out = git(
                ["diff", "--name-only", "--no-renames", check_sha(old), check_sha(new)], cwd=mirror
            )
        except WorkspaceError:
            return None
        return [line for line in out.splitlines() if line]

    def prune_all(self) -> None:
        """After a crash: forget worktrees whose directories are gone, in every mirror."""
        if not self.mirrors.is_dir():
            return
        for mirror in self.mirrors.glob("*.git"):
            try:
                git(["worktree", "prune"], cwd=mirror)
            except WorkspaceError:
                continue
