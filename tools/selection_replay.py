"""Replay a repository's history through `changed` selection: each commit as a pull request
against its parent, and the bars of the selection.

    python -m tools.selection_replay --repo PATH [--commits 20] [--backend cpu] [PATH...]

The commits are the newest that touched the given paths (default: the operators' own
folders of both layouts). Per commit: the operators selected and why. Bars: recall (every own
file of an operator that changed selected an operator) and precision (a commit that changes
only operators' own files and tests selects nothing through shared code).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from runner.job.selection import changed_files, select_changed
from runner.job.workspace import git
from workflows.changes import MODULE_PATTERNS, OWN_PATTERNS
from workflows.spec import load_workflows

DEFAULT_PATHS = ("kernels/ops", "kernels/backends", "src/flag_gems/ops",
                 "src/flag_gems/runtime/backend")  # fmt: skip


def own(path: str) -> bool:
    """An operator's own file (a package's `__init__.py` that registers many is not one)."""
    return any(p.match(path) for p in (*OWN_PATTERNS, *MODULE_PATTERNS))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", type=Path, required=True)
    parser.add_argument("--commits", type=int, default=20)
    parser.add_argument("--backend", default="cpu")
    parser.add_argument("paths", nargs="*", default=list(DEFAULT_PATHS))
    args = parser.parse_args(argv)
    workflow = load_workflows()[args.backend]
    log = ["log", "--no-merges", "--format=%H", "-n", str(args.commits), "--", *args.paths]
    commits = git(log, cwd=args.repo).split()
    recalled = own_files = precise = own_only = 0
    for sha in commits:
        chosen = select_changed(args.repo, f"{sha}^", sha, workflow)
        files = changed_files(args.repo, f"{sha}^", sha)
        title = git(["log", "-1", "--format=%s", sha], cwd=args.repo).strip()[:70]
        print(f"{sha[:9]} {title}")
        for name, reasons in chosen.operators.items():
            print(f"    {name}: {'; '.join(reasons[:2])}{' …' if len(reasons) > 2 else ''}")
        mine = [f.path for f in files if own(f.path) and not f.removed]
        reasons = [r for rs in chosen.operators.values() for r in rs]
        for path in mine:
            own_files += 1
            if any(r.startswith(f"{path}: its own file") for r in reasons):
                recalled += 1
            else:
                print(f"    MISSED: {path} selected no operator")
        if all(own(f.path) or f.path.startswith(("tests/", "benchmark/")) for f in files):
            own_only += 1
            shared = [r for r in reasons if ": imported by " in r]
            precise += not shared
            if shared:
                print(f"    NOT PRECISE: {shared[:2]}")
        if chosen.unmatched:
            print(f"    touching none: {len(chosen.unmatched)} files")
    print()
    print("| bar | measured | met |")
    print("|---|---|---|")
    print(f"| recall: every changed own file selects its operator | {recalled} of {own_files} "
          f"| {'yes' if recalled == own_files else 'no'} |")
    print(f"| precision: own-file-only commits select nothing else | {precise} of {own_only} "
          f"| {'yes' if precise == own_only else 'no'} |")
    return 0 if recalled == own_files and precise == own_only else 1


if __name__ == "__main__":
    sys.exit(main())
