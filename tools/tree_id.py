"""A fingerprint of the code in this tree, to say which code a device call ran: the device's
copy of the repository's git can lag the working tree it is given (a call's `git rev-parse
HEAD` read an older commit than the code it ran), so the GPU scripts print this beside it,
and the same command here, at a commit, says whether that commit is what ran.

    python -m tools.tree_id [ROOT]
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path

DIRS = ("devtools", "kernels", "ondemand", "runner", "sandbox", "service", "tools", "workflows")
SUFFIXES = {".py", ".yaml", ".yml", ".sh", ".cpp", ".cu", ".toml", ".ini"}


def tree_id(root: Path) -> str:
    """The first 12 hex digits of a SHA-256 over every source file's path and bytes, in
    path order; caches and build outputs (anything under a dot or `__pycache__` folder) are
    left out."""
    digest = hashlib.sha256()
    for top in DIRS:
        for path in sorted((root / top).rglob("*")):
            rel = path.relative_to(root)
            skipped = any(p.startswith(".") or p == "__pycache__" for p in rel.parts)
            if skipped or not path.is_file() or path.suffix not in SUFFIXES:
                continue
            digest.update(str(rel).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


if __name__ == "__main__":
    print(tree_id(Path(sys.argv[1]) if len(sys.argv) > 1 else Path.cwd()))
