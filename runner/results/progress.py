"""A job's progress, from the step's process to the service.

`ProgressFile` reads what `runner/plugins/pytest_ondemand_progress.py` appends in the job's process:
the file is the pull request's to write, so it is opened without following a link, read a
bounded amount at a time and in all, line by line with a cap on a line, and only well-formed
numbers and short strings are taken. `ProgressWatch` polls it while a step runs; `ProgressSender`
sends the latest progress to the service at most once per interval and only when it changed.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Self

from workflows.models import MAX_PROGRESS_FAILURES, MAX_PROGRESS_TESTS, Progress

log = logging.getLogger("ondemand.runner")
READ_BYTES = 256 * 1024  # per poll
MAX_BYTES = 16 * 1024 * 1024  # in all: past this the last progress read stands
MAX_LINE = 2048
POLL_S = 0.5


class ProgressFile:
    """The plugin's JSON lines, read as they grow; `progress` is what they said so far."""

    def __init__(self, path: Path, step: str | None = None) -> None:
        self.path = path
        self.offset = 0
        self.partial = b""
        self.skipping = False  # inside a line longer than MAX_LINE
        self.progress = Progress(step=step)

    def poll(self) -> bool:
        """Read what was appended since the last poll; True when the progress changed."""
        if self.offset >= MAX_BYTES:
            return False
        try:
            data = self._read()
        except OSError:
            return False  # not there yet, or not a regular file: nothing to say
        if not data:
            return False
        before = self.progress
        self.offset += len(data)
        lines = (self.partial + data).split(b"\n")
        self.partial = lines.pop()
        for line in lines:
            if self.skipping:
                self.skipping = False  # the end of an overlong line
                continue
            self._take(line)
        if len(self.partial) > MAX_LINE:
            self.partial, self.skipping = b"", True
        return self.progress != before

    def _read(self) -> bytes:
        fd = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise OSError(errno.EINVAL, "not a regular file", str(self.path))
            handle.seek(self.offset)
            return handle.read(min(READ_BYTES, MAX_BYTES - self.offset))

    def _take(self, line: bytes) -> None:
        try:
            record = json.loads(line)
        except ValueError:
            return
        if not isinstance(record, dict):
            return
        p = self.progress
        total = _count(record.get("total"))
        if total is not None:
            self.progress = p.model_copy(update={"tests_total": total})
            return
        done, failed = _count(record.get("done")), _count(record.get("failed"))
        if done is None or failed is None:
            return
        failures = p.failures
        test_id = record.get("id")
        if isinstance(test_id, str) and test_id and len(failures) < MAX_PROGRESS_FAILURES:
            failures = [*failures, test_id[:300]]
        self.progress = p.model_copy(
            update={
                "tests_done": max(p.tests_done, done),
                "failed": max(p.failed, failed),
                "failures": failures,
            }
        )


def _count(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_PROGRESS_TESTS:
        return value
    return None


class _Background:
    """A daemon thread running `_run` from the `with` block's entry; on exit `_stop` tells it
    to end and the thread is joined (bounded: a stuck send never holds the job)."""

    thread_name = "background"

    def __init__(self) -> None:
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._stop()
        self._thread.join(timeout=10)
        self._after()

    def _stop(self) -> None:
        self._done.set()

    def _after(self) -> None:
        """What runs once the thread has ended (or the join gave up)."""

    def _run(self) -> None:
        raise NotImplementedError


class ProgressWatch(_Background):
    """Polls a `ProgressFile` while a step runs and hands each change to `emit`."""

    thread_name = "progress-watch"

    def __init__(
        self, path: Path, step: str, emit: Callable[[Progress], None], poll_s: float = POLL_S
    ) -> None:
        self.file = ProgressFile(path, step)
        self.emit = emit
        self.poll_s = poll_s
        super().__init__()

    def _after(self) -> None:
        if self.file.poll():  # what came after the last poll
            self.emit(self.file.progress)

    def _run(self) -> None:
        while not self._done.wait(self.poll_s):
            if self.file.poll():
                self.emit(self.file.progress)


class ProgressSender(_Background):
    """Sends the latest progress with `send` in a thread of its own: at most once every
    `interval_s`, only when it changed, never blocking the job; a failed send is dropped
    (the next change says it again)."""

    thread_name = "progress-send"

    def __init__(self, send: Callable[[Progress], None], interval_s: float = 2.0) -> None:
        self.send = send
        self.interval_s = interval_s
        self._latest: Progress | None = None
        self._sent: Progress | None = None
        self._lock = threading.Lock()
        self._changed = threading.Event()
        super().__init__()

    def update(self, progress: Progress) -> None:
        with self._lock:
            self._latest = progress
        self._changed.set()

    def _stop(self) -> None:
        self._done.set()
        self._changed.set()

    def _run(self) -> None:
        while True:
            self._changed.wait()
            if self._done.is_set():
                return  # the result says the rest
            self._changed.clear()
            with self._lock:
                latest = self._latest
            if latest is not None and latest != self._sent:
                try:
                    self.send(latest)
                except Exception as exc:  # the service's trouble must not touch the job
                    log.debug("progress not sent: %s", exc)
                self._sent = latest
            self._done.wait(self.interval_s)


def progress_file(artifacts: Path) -> Path:
    """Where the plugin writes: in the job's artifacts directory, which the job user owns."""
    return artifacts / "progress.jsonl"
