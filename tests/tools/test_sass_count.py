"""The SASS counter compiles plans for sm_90 on a machine without a GPU (a real ptxas)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def count(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "tools.sass_count", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_a_two_launch_plan_prints_each_kernel_and_writes_the_listing(tmp_path: Path) -> None:
    listing = tmp_path / "global.sass"
    out = count("forward", "1,2,8,9,9", "1,1,1", "fp16", "--sass", str(listing))
    found = re.findall(r"^(\w+): (\d+) instructions, (\d+) registers a thread$", out, re.M)
    assert [name for name, _, _ in found] == ["global_groups_kernel", "global_groups_pick_kernel"]
    assert all(int(n) > 20 and int(r) > 0 for _, n, r in found)
    text = listing.read_text()
    assert "// global_groups_kernel" in text and "EXIT" in text


def test_a_config_is_planned_as_given() -> None:
    """Two tiles of one shape compile to different code (the default plan is not used); one
    run compiles both."""
    configs = ("column_max.Config(2, 1)", "column_max.Config(4, 2, True)")
    out = count("forward", "1,2,8,6,8", "2,3,4", "fp32", *(f"--config={c}" for c in configs))
    assert re.findall(r"^config (.+):$", out, re.M) == list(configs)
    counts = re.findall(r"column_max_kernel: (\d+) instructions", out)
    assert len(counts) == 2 and counts[0] != counts[1]
