"""The device scripts' clock log (tools/gpu_clocks.sh) against a stand-in nvidia-smi that
knows only the newer name of the throttle reasons, as recent drivers do."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

FAKE = """#!/usr/bin/env bash
echo "$*" >>"$CALLS"
case "$*" in *clocks_throttle_reasons*) exit 6 ;; esac
case "$*" in *-lms*) echo header; exec sleep 30 ;; esac
"""


def test_the_clock_log_falls_back_to_the_drivers_name_and_runs_in_the_background(
    tmp_path: Path,
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "nvidia-smi"
    fake.write_text(FAKE)
    fake.chmod(0o755)
    calls = tmp_path / "calls.txt"
    script = (
        f'source "{REPO}/tools/gpu_clocks.sh"\n'
        f'start_clock_log "{tmp_path}/smi.csv" 100 utilization.gpu\n'
        'echo "$clock_log_pid"\n'
    )
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "CALLS": str(calls)}
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.strip())
    try:
        deadline = time.monotonic() + 5
        while "header" not in (tmp_path / "smi.csv").read_text() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (tmp_path / "smi.csv").read_text() == "header\n"
        assert (tmp_path / "smi.err").exists()
        probe, log = calls.read_text().splitlines()
        assert "clocks_throttle_reasons.active" in probe
        assert log.split() == [
            "--query-gpu=timestamp,clocks.sm,clocks.mem,clocks_event_reasons.active,"
            "temperature.gpu,power.draw,utilization.gpu",
            "--format=csv", "-lms", "100",
        ]  # fmt: skip
        os.kill(pid, 0)  # still logging after the script that started it returned
    finally:
        os.kill(pid, 9)
