"""The soak's memory trace (tools/soak/memtrace, tools/soak/memdiff.py): a Python started
with the folder on its PYTHONPATH dumps snapshots of its allocations, and the reader names
the line whose held memory grew."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.soak import memdiff

MEMTRACE = Path(memdiff.__file__).parent / "memtrace"
GROWER = """\
import time
held = []
deadline = time.monotonic() + 1.0
while time.monotonic() < deadline:
    held.append(bytearray(4096))  # the leak
    time.sleep(0.002)
"""


def test_a_traced_process_dumps_snapshots_and_the_reader_names_what_grew(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = tmp_path / "grower.py"
    script.write_text(GROWER)
    env = {
        **os.environ,
        "PYTHONPATH": str(MEMTRACE),
        "SOAK_TRACE_MEMORY_DIR": str(tmp_path / "trace"),
        "SOAK_TRACE_EVERY_S": "0.3",
    }
    subprocess.run([sys.executable, str(script)], env=env, check=True, timeout=30)
    assert len(memdiff.snapshots(tmp_path / "trace")) >= 2
    assert memdiff.main([str(tmp_path / "trace"), "--from-minute", "0", "--top", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Python heap held (traced), MiB by minute: 0.0: ")
    assert lines[2].split()[0].startswith("+")  # the largest growth first, with its frames:
    assert any(line.strip().endswith("grower.py:5") for line in lines[3:9]), lines


def test_without_the_directory_set_nothing_is_traced(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(MEMTRACE)}
    env.pop("SOAK_TRACE_MEMORY_DIR", None)
    code = "import tracemalloc; print(tracemalloc.is_tracing())"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert done.stdout.strip() == "False"


def test_the_probe_writes_what_the_process_holds_each_period(tmp_path: Path) -> None:
    """The witness's light probe: one JSON line a period, the kernel's, glibc's and Python's
    views of its memory."""
    probe = tmp_path / "probe.jsonl"
    env = {**os.environ, "PYTHONPATH": str(MEMTRACE), "SOAK_PROBE_FILE": str(probe),
           "SOAK_PROBE_EVERY_S": "0.1"}  # fmt: skip
    code = "import time; held = [bytearray(2**20) for _ in range(8)]; time.sleep(0.35)"
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=30)
    lines = [json.loads(line) for line in probe.read_text().splitlines()]
    assert len(lines) >= 2
    last = lines[-1]
    assert last["rss_kib"] > 8 * 1024 and last["threads"] == 2 and last["fds"] >= 3
    assert last["py_threads"] == {"MainThread": 1, "soak-probe": 1}
    assert last["m_hblkhd_kib"] >= 8 * 1024  # the 1 MiB buffers: glibc's mmapped chunks
    assert last["ob_arenas"] >= 1 and last["py_blocks"] > 0 and last["arenas_kib"]
