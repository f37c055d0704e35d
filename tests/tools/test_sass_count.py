"""The SASS counter compiles plans for sm_90 on a machine without a GPU (a real ptxas)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ("column_max.Config(2, 1)", "column_max.Config(4, 2, True)")

# Each run through the counter's `main`, in one process: its imports (torch, Triton, the
# kernels) and Triton's key of its own sources are most of a run's CPU, paid once.
RUNS = """
import contextlib, io, json, sys
from tools.sass_count import main
printed = {}
for name, argv in json.loads(sys.argv[1]).items():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0, name
    printed[name] = out.getvalue()
print(json.dumps(printed))
"""


@pytest.fixture(scope="module")
def listing(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("sass") / "global.sass"


@pytest.fixture(scope="module")
def printed(listing: Path) -> dict[str, str]:
    """What the counter printed for each test's plan, by test."""
    runs = {
        "two launches": ["forward", "1,2,8,9,9", "1,1,1", "fp16", "--sass", str(listing)],
        "configs": ["forward", "1,2,8,6,8", "2,3,4", "fp32", *(f"--config={c}" for c in CONFIGS)],
    }
    done = subprocess.run(
        [sys.executable, "-c", RUNS, json.dumps(runs)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_a_two_launch_plan_prints_each_kernel_and_writes_the_listing(
    printed: dict[str, str], listing: Path
) -> None:
    out = printed["two launches"]
    found = re.findall(r"^(\w+): (\d+) instructions, (\d+) registers a thread$", out, re.M)
    assert [name for name, _, _ in found] == ["global_groups_kernel", "global_groups_pick_kernel"]
    assert all(int(n) > 20 and int(r) > 0 for _, n, r in found)
    text = listing.read_text()
    assert "// global_groups_kernel" in text and "EXIT" in text


def test_a_config_is_planned_as_given(printed: dict[str, str]) -> None:
    """Two tiles of one shape compile to different code (the default plan is not used); one
    run compiles both."""
    out = printed["configs"]
    assert re.findall(r"^config (.+):$", out, re.M) == list(CONFIGS)
    counts = re.findall(r"column_max_kernel: (\d+) instructions", out)
    assert len(counts) == 2 and counts[0] != counts[1]
