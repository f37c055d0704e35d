"""A job's log: kept in a local file as UTF-8 text and streamed to the service in chunks by
byte offset, as it comes (docs/runner-protocol.md, `logs`).

The steps write raw bytes; they are decoded incrementally (invalid bytes become U+FFFD) so
that the file, and every chunk sent, is valid UTF-8 and offsets mean the same on both sides.

A log is at most `limit` bytes, whatever a step prints: past its head, the stream keeps only
the last eighth in memory, and at the end writes a note of how much was cut, then that tail
(the steps' last words and the runner's own are what a reader needs). The service refuses
more than its own cap (413); the stream then stops sending and keeps its file.
"""

from __future__ import annotations

import codecs
import logging
import threading
from pathlib import Path

from ondemand.utf8 import whole_characters
from runner.link.client import LogFull, NotHeld, Rejected, ServiceClient, ServiceUnavailable

log = logging.getLogger(__name__)
CHUNK_BYTES = 256 * 1024
PROBE_OFFSET = 2**53
DEFAULT_LIMIT = 16 * 1024 * 1024
_NOTES_ROOM = 512  # the two notes of a cut log fit in this many bytes
MIN_LIMIT = 8 * _NOTES_ROOM


class LogStream:
    """Append with `write`; a background thread sends new text every `interval_s`."""

    def __init__(
        self,
        path: Path,
        client: ServiceClient | None,
        job_id: int,
        interval_s: float = 0.5,
        limit: int = DEFAULT_LIMIT,
    ) -> None:
        if limit < MIN_LIMIT:
            raise ValueError(f"a log limit under {MIN_LIMIT} bytes leaves no room")
        self.path = path
        self.client = client
        self.job_id = job_id
        self.interval_s = interval_s
        self.limit = limit
        self._tail_keep = limit // 8
        self._head_limit = limit - self._tail_keep - _NOTES_ROOM
        self._tail = bytearray()  # past the head: the last `_tail_keep` bytes
        self._cut = 0  # bytes dropped between the head and the tail
        self._capped = False
        self._full = False  # the service refused more
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._lock = threading.Lock()
        self._file = path.open("ab")
        self._size = path.stat().st_size
        self._sent = 0  # local bytes the service has
        self._base: int | None = None  # the service offset of our byte 0, once known
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def write(self, data: bytes) -> None:
        text = self._decoder.decode(data)
        if text:
            self._append(text.encode("utf-8"))

    def _append(self, encoded: bytes) -> None:
        with self._lock:
            if not self._capped:
                room = self._head_limit - self._size
                if len(encoded) <= room:
                    self._write(encoded)
                    return
                head = whole_characters(encoded[:room])
                self._write(head)
                encoded = encoded[len(head) :]
                self._capped = True
                self._write(
                    f"\n[ondemand] this log passed {self._head_limit} bytes: the middle is cut; "
                    f"its last {self._tail_keep} bytes come when the job ends\n".encode()
                )
            self._tail += encoded
            if len(self._tail) > self._tail_keep:
                drop = len(self._tail) - self._tail_keep
                del self._tail[:drop]
                self._cut += drop

    def _write(self, encoded: bytes) -> None:
        self._file.write(encoded)
        self._file.flush()
        self._size += len(encoded)

    def _write_tail(self) -> None:
        """Close a cut log: the note of what was cut, then the tail from a whole character."""
        with self._lock:
            if not self._capped:
                return
            tail = bytes(self._tail)
            skip = 0
            while skip < min(len(tail), 3) and 0x80 <= tail[skip] <= 0xBF:
                skip += 1  # the tail began inside a character
            self._cut += skip
            self._write(
                f"[ondemand] {self._cut} bytes cut here; the last {len(tail) - skip} bytes "
                "of the log follow\n".encode()
            )
            self._write(tail[skip:])
            self._tail.clear()
            self._capped = False
            self._head_limit = -1  # nothing more is kept

    def start(self) -> LogStream:
        if self.client is not None:
            self._thread = threading.Thread(target=self._run, name="log-stream", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._send()

    def _send(self) -> bool:
        """Send what the service lacks; False when the service could not be reached."""
        if self.client is None or self._full:
            return True
        if self._base is None:
            # Where our byte 0 goes: after whatever an earlier attempt of the job left there.
            # A chunk past the end is refused with the end (docs/runner-protocol.md).
            try:
                _, self._base = self.client.append_log(self.job_id, PROBE_OFFSET, "")
            except (ServiceUnavailable, Rejected) as exc:
                log.warning("job %s: log upload failed, will retry: %s", self.job_id, exc)
                return False
            except NotHeld:
                return True
        while True:
            with self._lock:
                size = self._size
            if self._sent >= size:
                return True
            with self.path.open("rb") as handle:
                handle.seek(self._sent)
                chunk = whole_characters(handle.read(min(CHUNK_BYTES, size - self._sent)))
            if not chunk:
                return True
            offset = self._base + self._sent
            try:
                accepted, end = self.client.append_log(self.job_id, offset, chunk.decode("utf-8"))
            except LogFull as exc:
                log.warning("job %s: the service keeps no more of its log: %s", self.job_id, exc)
                self._full = True
                return True
            except (ServiceUnavailable, Rejected) as exc:
                log.warning("job %s: log upload failed, will retry: %s", self.job_id, exc)
                return False
            except NotHeld:
                return True  # the job is not ours any more; the heartbeat handles that
            # Accepted or not, the service's end says where to continue from.
            before, self._sent = self._sent, min(max(end - self._base, 0), size)
            if not accepted and self._sent == before:
                return False  # no progress: try again later rather than spin

    def close(self, attempts: int = 5) -> None:
        """Flush the decoder, stop the thread and send the rest (a few tries)."""
        tail = self._decoder.decode(b"", final=True)
        if tail:
            self._append(tail.encode("utf-8"))
        self._write_tail()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        for _ in range(attempts):
            if self._send():
                break
            self._stop.wait(1.0)
        self._file.close()
