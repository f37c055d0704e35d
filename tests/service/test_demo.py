"""`ondemand demo` as a real process: sandbox, service and a cpu runner on loopback, a /test
comment, and the result comment printed. An operator this checkout lacks keeps it short."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.e2e
def test_demo_runs_the_loop_and_reports() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "service.cli", "demo", "--op", "no_such_op", "--timeout", "120"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    out = done.stdout
    assert done.returncode == 1, out + done.stderr  # not a pass: the operator does not exist
    for step in (
        "@maintainer commented: /test | no_such_op:cpu",
        "the bot reacted :eyes:",
        "status ondemand/no_such_op:cpu: pending",
        "job #1 running on demo-cpu",
        "<!-- ondemand:no_such_op:cpu -->",
        "verdict: failed",
    ):
        assert step in out, out
    assert out.index("job #1 queued") < out.index("job #1 running") < out.index("verdict")
