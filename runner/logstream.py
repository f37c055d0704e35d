"""A job's log: kept in a local file as UTF-8 text and streamed to the service in chunks by
byte offset, as it comes (docs/runner-protocol.md, `logs`).

The steps write raw bytes; they are decoded incrementally (invalid bytes become U+FFFD) so
that the file, and every chunk sent, is valid UTF-8 and offsets mean the same on both sides.
"""

from __future__ import annotations

import codecs
import logging
import threading
from pathlib import Path

from runner.client import NotHeld, Rejected, ServiceClient, ServiceUnavailable

log = logging.getLogger(__name__)
CHUNK_BYTES = 256 * 1024
PROBE_OFFSET = 2**53


def _utf8_prefix(data: bytes) -> bytes:
    """The longest prefix of `data` that does not end inside a UTF-8 character."""
    for cut in range(len(data), max(len(data) - 4, -1), -1):
        try:
            data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return data[:cut]
    return b""


class LogStream:
    """Append with `write`; a background thread sends new text every `interval_s`."""

    def __init__(
        self, path: Path, client: ServiceClient | None, job_id: int, interval_s: float = 0.5
    ) -> None:
        self.path = path
        self.client = client
        self.job_id = job_id
        self.interval_s = interval_s
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
            self._file.write(encoded)
            self._file.flush()
            self._size += len(encoded)

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
        if self.client is None:
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
                chunk = _utf8_prefix(handle.read(min(CHUNK_BYTES, size - self._sent)))
            if not chunk:
                return True
            offset = self._base + self._sent
            try:
                accepted, end = self.client.append_log(self.job_id, offset, chunk.decode("utf-8"))
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
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        for _ in range(attempts):
            if self._send():
                break
            self._stop.wait(1.0)
        self._file.close()
