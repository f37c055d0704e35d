"""Known secrets (the runner's token, the registration token) cut out of what a job produces,
before it leaves the runner: a second line of defence, since a step cannot read them."""

from __future__ import annotations

from collections.abc import Callable, Iterable

MARK = "[redacted]"
MIN_SECRET = 8  # shorter strings are not secrets worth hunting (and would mangle text)


def _secrets(values: Iterable[str | None]) -> list[str]:
    return sorted({v for v in values if v and len(v) >= MIN_SECRET}, key=len, reverse=True)


def redact_text(text: str, secrets: Iterable[str | None]) -> str:
    for secret in _secrets(secrets):
        text = text.replace(secret, MARK)
    return text


class Redactor:
    """A byte sink that passes data on with secrets replaced; it holds back the last bytes
    that could be the start of a secret split across two writes, until `flush`."""

    def __init__(self, sink: Callable[[bytes], None], secrets: Callable[[], Iterable[str | None]]):
        self.sink = sink
        self.secrets = secrets
        self._held = b""

    def write(self, data: bytes) -> None:
        secrets = [s.encode() for s in _secrets(self.secrets())]
        buffer = self._held + data
        for secret in secrets:
            buffer = buffer.replace(secret, MARK.encode())
        keep = max((len(s) for s in secrets), default=1) - 1
        cut = len(buffer) - keep if keep else len(buffer)
        # Never hold back past a newline: a log line is complete once it ends.
        newline = buffer.rfind(b"\n")
        cut = max(cut, newline + 1) if newline >= 0 else cut
        self._held = buffer[max(cut, 0) :]
        if cut > 0:
            self.sink(buffer[:cut])

    def flush(self) -> None:
        if self._held:
            held, self._held = self._held, b""
            self.sink(held)
