"""The operators a commit changes against its base, read from a local git repository: the
changed files (renames found) and their changed lines from `git diff base...ref`, the tree
and its sources at `ref`, and `workflows.changes.select` over them."""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from runner.job.layouts import FLAGGEMS
from runner.job.workspace import WorkspaceError, git
from workflows.changes import TEST_DIRS, Changed, Selection, candidates, changed_lines, markers
from workflows.changes import select as select_changes
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


# pytest's own markers and its usual plugins': never an operator.
NOT_OPERATORS = frozenset({
    "parametrize", "skip", "skipif", "xfail", "usefixtures", "filterwarnings", "timeout",
    "flaky", "asyncio", "anyio", "tryfirst", "trylast", "hookwrapper", "order", "dependency",
})  # fmt: skip


def select_changed(repo: Path, base: str, ref: str, workflow: WorkflowSpec) -> Selection:
    """The operators `ref` changes against `base` in `repo`, and why. The operators are the
    markers of the tests the workflow's accuracy step runs for the tree's layout (this
    repository's `tests/kernels`; FlagGems' `tests/` and `benchmark/`), and only those tests'
    changes select by the lines that changed."""
    blobs = _python_blobs(repo, ref)
    paths = list(blobs)
    flaggems = any(p.startswith(("src/flag_gems/", "flag_gems/")) for p in paths)
    steps = workflow.steps_for(FLAGGEMS if flaggems else None)
    argv = [a for step in steps if step.kind == "accuracy" for a in step.argv]
    roots = tuple(r.rstrip("/") + "/" for r in accuracy_roots(argv, paths)) or (
        "tests/", "benchmark/"
    )

    sources = _read_blobs(repo, [sha for sha in blobs.values() if sha])

    def read(path: str) -> str | None:
        return sources.get(blobs.get(path) or "")

    used = set().union(
        *(markers(read(p)) for p in paths if p.startswith(roots) and p.endswith(".py"))
    )
    every = changed_files(repo, base, ref)
    # Tests outside the step's directories (this repository's tests/e2e) name no operator.
    outside = [c for c in every if c.path.startswith(TEST_DIRS) and not c.path.startswith(roots)]
    changed = [c for c in every if c not in outside]
    # An operator: a marker of those tests that names an operator of the tree (one with own
    # files), not a marker of another kind (`gpu`, `plumbing`).
    chosen = select_changes(changed, paths, read, (used & candidates(paths, read)) - NOT_OPERATORS)
    chosen.unmatched = sorted([*chosen.unmatched, *(c.path for c in outside)])
    return chosen


def accuracy_roots(argv: Sequence[str], paths: Sequence[str]) -> list[str]:
    """The test directories an accuracy step's argv names (those the tree has), or none."""
    dirs = {p.rsplit("/", 1)[0] for p in paths if "/" in p}
    every = {"/".join(d.split("/")[: i + 1]) for d in dirs for i in range(d.count("/") + 1)}
    return [a for a in argv if "{" not in a and not a.startswith("-") and a.rstrip("/") in every]


def _python_blobs(repo: Path, ref: str) -> dict[str, str | None]:
    """Every path of the tree at `ref` → its blob (None for a file not read: not Python)."""
    out = git(["ls-tree", "-r", "-z", "--end-of-options", ref], cwd=repo)
    found: dict[str, str | None] = {}
    for entry in filter(None, out.split("\0")):
        meta, _, path = entry.partition("\t")
        kind, sha = meta.split()[1:3]
        found[path] = sha if kind == "blob" and path.endswith(".py") else None
    return found


def _read_blobs(repo: Path, shas: Sequence[str], limit: int = 2 * 1024 * 1024) -> dict[str, str]:
    """The blobs' texts, read by one `git cat-file --batch` (a tree has thousands); a blob
    over `limit` bytes is left out, as a file that cannot be parsed."""
    unique = list(dict.fromkeys(shas))
    proc = subprocess.run(
        ["git", "-C", str(repo), "cat-file", "--batch"],
        input="".join(f"{sha}\n" for sha in unique).encode(),
        capture_output=True,
        timeout=300,
        check=False,
    )
    if proc.returncode != 0:
        raise WorkspaceError(f"git cat-file: {proc.stderr.decode(errors='replace').strip()}")
    data, at, found = proc.stdout, 0, {}
    for sha in unique:
        end = data.index(b"\n", at)
        header = data[at:end].split()
        at = end + 1
        if len(header) < 3 or header[1] == b"missing":
            continue
        size = int(header[2])
        if size <= limit:
            found[sha] = data[at : at + size].decode("utf-8", errors="replace")
        at += size + 1
    return found
