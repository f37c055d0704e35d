"""The operators a commit changes against its base, read from a local git repository: the
changed files (renames found) and their changed lines from `git diff base...ref`, the tree
and its sources at `ref`, and `workflows.changes.select` over them."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path

from runner.job.workspace import WorkspaceError, git
from workflows.changes import MODULE_PATTERNS, OWN_PATTERNS, Changed, Selection, changed_lines
from workflows.changes import select as select_changes

_MARK = re.compile(r"pytest\.mark\.([A-Za-z_][A-Za-z0-9_]*)")


def changed_files(repo: Path, base: str, ref: str) -> list[Changed]:
    """What `ref` changes since its merge base with `base`, as GitHub lists a pull request's
    files, with each file's changed lines."""
    spec = f"{base}...{ref}"
    fields = git(["diff", "-z", "--name-status", "-M", "--end-of-options", spec], cwd=repo)
    lines = changed_lines(git(["diff", "-U0", "-M", "--end-of-options", spec], cwd=repo))
    parts = fields.split("\0")
    found: list[Changed] = []
    i = 0
    while i < len(parts) - 1:
        status = parts[i]
        if status[:1] in ("R", "C"):
            old, new, i = parts[i + 1], parts[i + 2], i + 3
            found.append(Changed(new, previous=old, lines=lines.get(new)))
        else:
            path, i = parts[i + 1], i + 2
            removed = status.startswith("D")
            known = None if removed else lines.get(path, ())
            found.append(Changed(path, lines=known, removed=removed))
    return found


def select_changed(repo: Path, base: str, ref: str) -> Selection:
    """The operators `ref` changes against `base` in `repo`, and why."""
    listed = git(["ls-tree", "-r", "--name-only", "-z", ref], cwd=repo).split("\0")
    paths = [p for p in listed if p]

    @functools.cache
    def read(path: str) -> str | None:
        try:
            return git(["show", f"{ref}:{path}"], cwd=repo)
        except WorkspaceError:
            return None

    return select_changes(changed_files(repo, base, ref), paths, read, _operators(paths, read))


def _operators(paths: list[str], read: Callable[[str], str | None]) -> set[str]:
    """The markers the tests use that name an operator of the tree: an operator's own
    folder, or a name an operator module defines (FlagGems)."""
    candidates: set[str] = set()
    for path in paths:
        for pattern in OWN_PATTERNS:
            match = pattern.match(path)
            if match:
                candidates.add(match["op"])
        for pattern in MODULE_PATTERNS:
            match = pattern.match(path)
            if match:
                candidates.add(match["module"].lstrip("_"))
                source = read(path) or ""
                candidates |= set(re.findall(r"^def _?([A-Za-z0-9_]+)\(", source, re.M))
    used: set[str] = set()
    for path in paths:
        if path.startswith(("tests/", "benchmark/")) and path.endswith(".py"):
            used |= set(_MARK.findall(read(path) or ""))
    return candidates & used
