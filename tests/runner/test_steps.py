"""Steps: argv in a process group, streamed output, timeouts and cancellation that kill the
whole group."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

from runner.job.steps import HeldOutput, run_step

ENV = {"PATH": os.environ["PATH"]}

# A parent that starts a child in its process group, writes the child's pid, and waits.
FAMILY = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
open(sys.argv[1], "w").write(str(child.pid))
print("ready", flush=True)
time.sleep(300)
"""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead for our purposes.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


def _wait_for(path: Path, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.read_text()):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def test_exit_code_and_streamed_output(tmp_path: Path) -> None:
    chunks: list[bytes] = []
    code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    outcome = run_step(
        [sys.executable, "-c", code], cwd=tmp_path, env=ENV, timeout_s=30, on_output=chunks.append
    )
    assert outcome.exit_code == 3
    assert not outcome.timed_out and not outcome.cancelled
    joined = b"".join(chunks).decode()
    assert "out" in joined and "err" in joined
    assert "err" in outcome.tail


def test_argv_is_not_a_shell(tmp_path: Path) -> None:
    outcome = run_step(
        [sys.executable, "-c", "import sys; print(sys.argv[1])", "$(touch pwned); `x` | y"],
        cwd=tmp_path,
        env=ENV,
        timeout_s=30,
    )
    assert outcome.exit_code == 0
    assert "$(touch pwned); `x` | y" in outcome.tail
    assert not (tmp_path / "pwned").exists()


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    started = time.monotonic()
    outcome = run_step(
        [sys.executable, "-c", FAMILY, str(pidfile)],
        cwd=tmp_path,
        env=ENV,
        timeout_s=2,
        grace_s=1,
    )
    assert outcome.timed_out
    assert time.monotonic() - started < 15
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the step's child survived the timeout"
    assert "ready" in outcome.tail


def test_cancel_stops_the_step(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    cancel = threading.Event()
    threading.Timer(1.0, cancel.set).start()
    outcome = run_step(
        [sys.executable, "-c", FAMILY, str(pidfile)],
        cwd=tmp_path,
        env=ENV,
        timeout_s=120,
        cancel=cancel,
        grace_s=1,
    )
    assert outcome.cancelled and not outcome.timed_out
    assert outcome.duration_s < 10
    _wait_for(pidfile)
    time.sleep(0.2)
    assert not _alive(int(pidfile.read_text()))


def test_sigterm_grace_then_sigkill(tmp_path: Path) -> None:
    stubborn = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('x', flush=True); time.sleep(300)"
    )
    started = time.monotonic()
    outcome = run_step(
        [sys.executable, "-c", stubborn], cwd=tmp_path, env=ENV, timeout_s=1, grace_s=1
    )
    assert outcome.timed_out
    assert outcome.exit_code is not None and outcome.exit_code < 0  # killed by a signal
    assert time.monotonic() - started < 10


def test_missing_program_is_a_start_error(tmp_path: Path) -> None:
    outcome = run_step(["/nonexistent/prog"], cwd=tmp_path, env=ENV, timeout_s=5)
    assert outcome.exit_code is None
    assert outcome.start_error and "/nonexistent/prog" in outcome.start_error


def test_output_held_until_released_then_passed_on_in_order() -> None:
    """A process started ahead of its step logs nothing while the steps before it run: its
    output is held (up to a limit, the rest dropped and said), then passed on in order, and
    everything after the release goes straight through."""
    out = bytearray()
    held = HeldOutput(out.extend, limit=8)
    held(b"abc")
    held(b"defgh")
    held(b"ijk")  # past the limit: dropped
    assert out == b""
    held.release()
    assert out == b"abcdefgh[ondemand] 3 bytes of early output dropped\n"
    held(b"xyz")
    held.release()  # a second release changes nothing
    assert out.endswith(b"dropped\nxyz")
