"""tools.side_by_side on the interpreter: the committed kernels beside the tree's, one row."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tools.side_by_side import unpack

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(
    shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs the git checkout"
)


def test_a_commit_unpacks_as_its_own_package(tmp_path: Path) -> None:
    package = unpack("HEAD", "kernels_before", tmp_path, ROOT)
    runtime = (package / "runtime.py").read_text()
    assert "from kernels import" not in runtime and "import kernels\n" not in runtime
    assert "kernels_before" in (package / "__init__.py").read_text()


def test_one_tiny_row_side_by_side(tmp_path: Path) -> None:
    env = {**os.environ, "KERNELS_VENDOR": "cpu", "PYTHONPATH": str(ROOT)}
    env.update(CUDA_VISIBLE_DEVICES="", MUSA_VISIBLE_DEVICES="")
    done = subprocess.run(
        [sys.executable, "-m", "tools.side_by_side", "--before", "HEAD", "--sizes", "tiny",
         "--rows", "adaptive_max_pool3d_backward:mthreads", "--dtypes", "float16", "--limit",
         "1", "--rounds", "1", "--json", str(tmp_path / "side.json")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "| adaptive_max_pool3d_backward | mthreads | float16 | 1,1,8,8,8 → 4,4,4 |" in (
        done.stdout
    )
    (row,) = json.loads((tmp_path / "side.json").read_text())["rows"]
    assert row["before_ms"] > 0 and row["after_ms"] > 0
