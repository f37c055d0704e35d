"""tools.tree_id: the same code gives the same id wherever it lies; a changed byte changes it."""

from __future__ import annotations

import shutil
from pathlib import Path

from tools.tree_id import tree_id


def test_the_id_follows_the_code_not_the_place_or_the_caches(tmp_path: Path) -> None:
    root = tmp_path / "a"
    (root / "runner" / "__pycache__").mkdir(parents=True)
    (root / "runner" / "x.py").write_text("X = 1\n")
    (root / "workflows").mkdir()
    (root / "workflows" / "cpu.yaml").write_text("name: cpu\n")
    first = tree_id(root)
    (root / "runner" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    (root / "runner" / "notes.txt").write_text("not code\n")
    assert tree_id(root) == first
    copy = tmp_path / "b"
    shutil.copytree(root, copy)
    assert tree_id(copy) == first
    (copy / "runner" / "x.py").write_text("X = 2\n")
    assert tree_id(copy) != first
