"""The operators a commit changes against its base, read from a local git repository: the
changed files (renames found) and their changed lines from `git diff base...ref`, the tree
and its sources at `ref`, and `workflows.changes.select_for_workflow` over them."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ondemand.git import Tree, git
from workflows.changes import Changed, Rule, Selection, changed_lines, select_for_workflow
from workflows.spec import WorkflowSpec


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


def select_changed(
    repo: Path, base: str, ref: str, workflow: WorkflowSpec, rules: Sequence[Rule] = ()
) -> Selection:
    """The operators `ref` changes against `base` in `repo`, and why."""
    tree = Tree(repo, ref)
    changed = changed_files(repo, base, ref)
    return select_for_workflow(changed, tree.paths, tree.read, workflow, rules)
