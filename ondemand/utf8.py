"""UTF-8 at byte boundaries: logs travel and are stored by byte offset, and a cut must never
split a character."""

from __future__ import annotations


def whole_characters(data: bytes) -> bytes:
    """The longest prefix of `data` that does not end inside a UTF-8 character."""
    for cut in range(len(data), max(len(data) - 4, -1), -1):
        try:
            data[:cut].decode("utf-8")
        except UnicodeDecodeError:
            continue
        return data[:cut]
    return b""
