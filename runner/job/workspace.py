"""Checkouts: one cached bare mirror per repository, and per job a fresh worktree at exactly the
pinned SHA (fetching the pull request's ref when the SHA is not yet local), removed afterwards.

Only git is run, with argv lists; the URL and SHA come from the service, the SHA is checked to
be hex before anything sees it.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path

_SHA = re.compile(r"^[0-9a-f]{7,64}$")
GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", "LC_ALL": "C"}
# No hook, filter or fsmonitor command of any repository's configuration ever runs: git runs
# as the runner, on mirrors of pull requests.
GIT_SAFE = ("-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false")


class WorkspaceError(RuntimeError):
    """A checkout that could not be made; the message says which git call and why."""


def git(args: Sequence[str], cwd: Path | None = None, timeout: float = 600) -> str:
    """Run git with `args`; its stdout, or WorkspaceError with its stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ONDEMAND_")} | GIT_ENV
    try:
        proc = subprocess.run(
            ["git", *GIT_SAFE, *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise WorkspaceError(f"git {args[0]}: {exc}") from exc
    if proc.returncode != 0:
        detail = (proc.stderr or proc.stdout).strip().splitlines()
        raise WorkspaceError(f"git {' '.join(args[:2])}: {' / '.join(detail[-3:]) or 'failed'}")
    return proc.stdout


def check_sha(sha: str) -> str:
    if not _SHA.match(sha):
        raise WorkspaceError(f"not a commit SHA: {sha!r}")
    return sha


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class Workspaces:
    """Mirrors under `root/mirrors`, worktrees wherever the caller asks (the job's directory)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.mirrors = root / "mirrors"

    def mirror_path(self, url: str) -> Path:
        digest = hashlib.sha256(url.encode()).hexdigest()[:16]
        tail = re.sub(r"[^A-Za-z0-9_.-]+", "_", url.rstrip("/").rsplit("/", 1)[-1])[:40]
        return self.mirrors / f"{tail}-{digest}.git"

    def _has_commit(self, mirror: Path, sha: str) -> bool:
        try:
            git(["cat-file", "-e", f"{sha}^{{commit}}"], cwd=mirror)
        except WorkspaceError:
            return False
        return True

    def fetch(self, url: str, sha: str, pr_number: int | None = None) -> Path:
        """The mirror of `url`, updated until it has `sha`: branches and tags, then the PR's
        head ref, then the SHA itself (servers that allow it)."""
        check_sha(sha)
        mirror = self.mirror_path(url)
        with _locked(mirror.with_suffix(".lock")):
            if not (mirror / "HEAD").exists():
                if mirror.exists():
                    shutil.rmtree(mirror)
                git(["init", "--bare", "--quiet", str(mirror)])
            if self._has_commit(mirror, sha):
                return mirror
            attempts: list[list[str]] = [
                ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"],
            ]
            if pr_number:
                attempts.append(
                    [f"+refs/pull/{int(pr_number)}/head:refs/pull/{int(pr_number)}/head"]
                )
            attempts.append([sha])
            problems = []
            for refspecs in attempts:
                try:
                    git(["fetch", "--quiet", "--no-tags", "--", url, *refspecs], cwd=mirror)
                except WorkspaceError as exc:
                    problems.append(str(exc))
                    continue
                if self._has_commit(mirror, sha):
                    return mirror
            why = "; ".join(problems) or "no fetched ref contains it"
            raise WorkspaceError(f"commit {sha} not found in {url}: {why}")

    def fetch_branch(self, mirror: Path, url: str, branch: str) -> None:
        """Bring `branch` of `url` up to date in the mirror (for the merge base)."""
        if branch.startswith("-") or not re.match(r"^[A-Za-z0-9._/-]+$", branch):
            raise WorkspaceError(f"not a branch name: {branch!r}")
        with _locked(mirror.with_suffix(".lock")):
            refspec = f"+refs/heads/{branch}:refs/heads/{branch}"
            git(["fetch", "--quiet", "--no-tags", "--", url, refspec], cwd=mirror)

    def add_worktree(self, mirror: Path, sha: str, path: Path) -> Path:
        """A detached worktree of `mirror` at `sha` in `path` (replacing a stale one)."""
        check_sha(sha)
        with _locked(mirror.with_suffix(".lock")):
            if path.exists():
                self._remove(mirror, path)
            git(["worktree", "prune"], cwd=mirror)
            git(["worktree", "add", "--detach", "--force", "--quiet", str(path), sha], cwd=mirror)
        return path

    def remove_worktree(self, mirror: Path, path: Path) -> None:
        with _locked(mirror.with_suffix(".lock")):
            self._remove(mirror, path)

    def _remove(self, mirror: Path, path: Path) -> None:
        with suppress(WorkspaceError):
            git(["worktree", "remove", "--force", "--force", str(path)], cwd=mirror)
        shutil.rmtree(path, ignore_errors=True)
        git(["worktree", "prune"], cwd=mirror)

    def merge_base(self, mirror: Path, sha: str, base: str) -> str | None:
        """The merge base of `sha` and `base` (a SHA, or a branch name in the mirror)."""
        ref = base if _SHA.match(base) else f"refs/heads/{base}"
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
