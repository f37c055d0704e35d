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


class StepProcess:
    """A started step: its process group, its output pumped to `on_output` as it comes (and
    its tail kept). `run_step` waits for one; a long-lived worker (`bench_workers.py`) is one
    the runner talks to while it runs."""

    def __init__(self, proc: subprocess.Popen[bytes], on_output: OutputSink | None) -> None:
        self.proc, self.started, self.tail = proc, time.monotonic(), _Tail()
        self.reader = threading.Thread(
            target=self._pump, args=(on_output,), name="step-output", daemon=True
        )
        self.reader.start()

    def _pump(self, on_output: OutputSink | None) -> None:
        assert self.proc.stdout is not None
        while chunk := self.proc.stdout.read1(65536):
            self.tail.add(chunk)
            if on_output is not None:
                on_output(chunk)

    @property
    def pid(self) -> int:
        return self.proc.pid  # also the process group id

    def running(self) -> bool:
        return self.proc.poll() is None

    def kill(self, grace_s: float) -> None:
        """SIGTERM its group, then SIGKILL what is left after `grace_s`."""
        kill_group(self.proc, grace_s)

    def finish(self, *, timed_out: bool = False, cancelled: bool = False) -> StepOutcome:
        """How it ended, once its leader has: stragglers it left in the group (they would
        hold the pipe open) are killed, and its output read to the end."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.reader.join(timeout=10)
        self.proc.wait()
        return StepOutcome(
            exit_code=self.proc.returncode,
            duration_s=time.monotonic() - self.started,
            timed_out=timed_out,
            cancelled=cancelled,
            tail=self.tail.text(),
        )


class HeldOutput:
    """An output sink that holds what comes until `release()`, then passes all of it on: a
    process started ahead of its step (while the steps before it run) logs after them, not
    inside their output. What comes past `limit` bytes before the release is dropped, said
    once."""

    def __init__(self, sink: OutputSink, limit: int = 1024 * 1024) -> None:
        self._sink, self._limit = sink, limit
        self._held: list[bytes] = []
        self._size, self._dropped = 0, 0
        self._released = False
        self._lock = threading.Lock()

    def __call__(self, chunk: bytes) -> None:
        with self._lock:
            if self._released:
                self._sink(chunk)
                return
            room = self._limit - self._size
            self._held.append(chunk[:room])
            self._size += min(len(chunk), room)
            self._dropped += max(0, len(chunk) - room)

    def release(self) -> None:
        """Pass on what was held, then everything as it comes."""
        with self._lock:
            if self._released:
                return
            self._released = True
            held, self._held = b"".join(self._held), []
            if held:
                self._sink(held)
            if self._dropped:
                note = f"[ondemand] {self._dropped} bytes of early output dropped\n"
                self._sink(note.encode())


def start_step(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    on_output: OutputSink | None = None,
    on_start: Callable[[int], None] | None = None,
) -> StepProcess | StepOutcome:
    """Start `argv` in its own session and process group (stdout and stderr merged); the
    outcome instead where it could not start."""
    started = time.monotonic()
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
    return StepProcess(proc, on_output)


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
    step = start_step(argv, cwd=cwd, env=env, on_output=on_output, on_start=on_start)
    if isinstance(step, StepOutcome):
        return step
    deadline = step.started + timeout_s
    timed_out = cancelled = False
    while step.running():
        if cancel is not None and cancel.is_set():
            cancelled = True
        elif time.monotonic() >= deadline:
            timed_out = True
        if timed_out or cancelled:
            step.kill(grace_s)
            break
        with contextlib.suppress(subprocess.TimeoutExpired):
            step.proc.wait(timeout=0.1)
    return step.finish(timed_out=timed_out, cancelled=cancelled)
