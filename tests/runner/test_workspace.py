"""Workspaces: a cached bare mirror, a worktree at exactly the pinned SHA, PR refs fetched when
the SHA is not on a branch, clean removal."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from ondemand.git import MAX_BLOB_BYTES, GitError, Tree
from runner.job.workspace import WorkspaceError, Workspaces
from tests.runner.tinyrepo import TinyRepo, add_hidden_commit, make_tiny_repo
from tests.support.git import git


def _head(path: Path) -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_worktree_at_the_pinned_sha(tiny_repo: TinyRepo, tmp_path: Path) -> None:
    spaces = Workspaces(tmp_path / "cache")
    mirror = spaces.fetch(str(tiny_repo.path), tiny_repo.head_sha, 7)
    tree = spaces.add_worktree(mirror, tiny_repo.head_sha, tmp_path / "job" / "src")
    assert _head(tree) == tiny_repo.head_sha
    assert (tree / "tests" / "kernels" / "test_ops.py").is_file()
    # The same mirror serves the next job without fetching again, at another SHA.
    assert spaces.fetch(str(tiny_repo.path), tiny_repo.base_sha, None) == mirror
    spaces.remove_worktree(mirror, tree)
    assert not tree.exists()
    listing = subprocess.run(
        ["git", "worktree", "list"], cwd=mirror, capture_output=True, text=True, check=True
    ).stdout
    assert str(tree) not in listing


def test_a_base_commit_pushed_after_the_mirror_was_made_is_fetched(tmp_path: Path) -> None:
    """The merge base is asked for by SHA alone (no pull request): a base branch that moved
    since the mirror's last fetch is fetched, not an error. On a repository of its own: the
    session's tiny repository is every runner test's, and a later test in this worker reads
    its main as the base commit."""
    tiny_repo = make_tiny_repo(tmp_path / "origin" / "tinyops")
    spaces = Workspaces(tmp_path / "cache")
    mirror = spaces.fetch(str(tiny_repo.path), tiny_repo.head_sha, 7)
    git(tiny_repo.path, "commit", "-q", "--allow-empty", "-m", "main moves on")
    moved = git(tiny_repo.path, "rev-parse", "HEAD")
    assert not spaces.has_commit(mirror, moved)
    assert spaces.fetch(str(tiny_repo.path), moved, None) == mirror
    assert spaces.has_commit(mirror, moved)
    with pytest.raises(WorkspaceError, match="not found"):
        spaces.fetch(str(tiny_repo.path), "1" * 40, None)


def test_sha_only_on_the_pull_request_ref(tiny_repo: TinyRepo, tmp_path: Path) -> None:
    hidden = add_hidden_commit(tiny_repo)
    spaces = Workspaces(tmp_path / "cache")
    mirror = spaces.fetch(str(tiny_repo.path), hidden, 8)
    assert (mirror / "refs" / "pull" / "8" / "head").exists() or "refs/pull/8/head" in (
        subprocess.run(["git", "show-ref"], cwd=mirror, capture_output=True, text=True).stdout
    )
    tree = spaces.add_worktree(mirror, hidden, tmp_path / "src")
    assert (tree / "NOTE").read_text() == "only on the PR ref\n"


def test_unknown_and_malformed_shas(tiny_repo: TinyRepo, tmp_path: Path) -> None:
    spaces = Workspaces(tmp_path / "cache")
    with pytest.raises(WorkspaceError, match="not a commit SHA"):
        spaces.fetch(str(tiny_repo.path), "--upload-pack=touch /tmp/x", 1)
    with pytest.raises(WorkspaceError, match="not found"):
        spaces.fetch(str(tiny_repo.path), "0" * 40, 99)


def test_merge_base_and_stale_worktree(tiny_repo: TinyRepo, tmp_path: Path) -> None:
    spaces = Workspaces(tmp_path / "cache")
    mirror = spaces.fetch(str(tiny_repo.path), tiny_repo.head_sha, 7)
    assert spaces.merge_base(mirror, tiny_repo.head_sha, "main") == tiny_repo.base_sha
    assert spaces.merge_base(mirror, tiny_repo.head_sha, "no-such-branch") is None
    target = tmp_path / "src"
    spaces.add_worktree(mirror, tiny_repo.base_sha, target)
    (target / "leftover").write_text("from a crashed job")
    # A crash left the directory: the next job at the same path replaces it.
    spaces.add_worktree(mirror, tiny_repo.head_sha, target)
    assert _head(target) == tiny_repo.head_sha
    assert not (target / "leftover").exists()


def test_a_tree_reads_its_python_sources_within_bounds(tmp_path: Path) -> None:
    """The change selection's view of a commit: every path, Python sources read in one call,
    one past MAX_BLOB_BYTES left unread, and a tree whose sources pass the budget refused
    (a pull request's tree is read into memory, whatever its size)."""
    repo = tmp_path / "r"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "a.py").write_text("import os\n")
    (repo / "big.py").write_text("x = 1\n" * (MAX_BLOB_BYTES // 6 + 1))
    (repo / "notes.md").write_text("hi\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "tree")
    sha = git(repo, "rev-parse", "HEAD")
    tree = Tree(repo, sha)
    assert sorted(tree.paths) == ["a.py", "big.py", "notes.md"]
    assert tree.read("a.py") == "import os\n"
    assert tree.read("big.py") is None and tree.read("notes.md") is None
    with pytest.raises(GitError, match=r"come to 0 MiB; the selection reads at most 0 MiB"):
        Tree(repo, sha, budget=5)
