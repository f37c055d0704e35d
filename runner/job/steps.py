"""Run one step: an argv in its own process group, output streamed as it comes, a timeout and a
cancellation that stop the whole group (SIGTERM, a grace period, then SIGKILL).

Never a shell: the argv is executed as given.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

OutputSink = Callable[[bytes], None]
TAIL_BYTES = 16_384


@dataclass(frozen=True)
class StepOutcome:
    """How a step ended. `exit_code` is None when it never started."""

    exit_code: int | None
    duration_s: float
    timed_out: bool = False
    cancelled: bool = False
    start_error: str | None = None
    tail: str = ""


class _Tail:
    """The last few kilobytes of a stream, for error reports."""

    def __init__(self, limit: int = TAIL_BYTES) -> None:
        self.limit = limit
        self.data = bytearray()

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        if len(self.data) > 2 * self.limit:
            del self.data[: len(self.data) - self.limit]

    def text(self, lines: int = 60) -> str:
        text = bytes(self.data[-self.limit :]).decode("utf-8", "replace")
        return "\n".join(text.splitlines()[-lines:])


def kill_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the process group, wait `grace_s`, then SIGKILL whatever is left of it."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        # The leader is gone; members of the group may still live (a forked child).
        if sig == signal.SIGTERM:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        return


def run_step(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    on_output: OutputSink | None = None,
    cancel: threading.Event | None = None,
    grace_s: float = 5.0,
    on_start: Callable[[int], None] | None = None,
) -> StepOutcome:
    """Run `argv` to completion, timeout or cancellation; stdout and stderr are merged."""
    started = time.monotonic()
    tail = _Tail()
    try:
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own session and process group: killpg reaches all
        )
    except OSError as exc:
        return StepOutcome(None, time.monotonic() - started, start_error=f"{argv[0]}: {exc}")

    if on_start is not None:
        on_start(proc.pid)  # also the process group id

    def pump() -> None:
        assert proc.stdout is not None
        while chunk := proc.stdout.read1(65536):
            tail.add(chunk)
            if on_output is not None:
                on_output(chunk)

    reader = threading.Thread(target=pump, name="step-output", daemon=True)
    reader.start()
    deadline = started + timeout_s
    timed_out = cancelled = False
    while proc.poll() is None:
        if cancel is not None and cancel.is_set():
            cancelled = True
        elif time.monotonic() >= deadline:
            timed_out = True
        if timed_out or cancelled:
            kill_group(proc, grace_s)
            break
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.1)
    else:
        # The leader exited; stragglers it left in the group would hold the pipe open.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
    reader.join(timeout=10)
    proc.wait()
    return StepOutcome(
        exit_code=proc.returncode,
        duration_s=time.monotonic() - started,
        timed_out=timed_out,
        cancelled=cancelled,
        tail=tail.text(),
    )
