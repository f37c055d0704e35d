"""HTTP byte ranges (RFC 9110 §14): the one range of a `Range` header a log page serves."""

from __future__ import annotations

import re
from dataclasses import dataclass

_RANGE = re.compile(r"^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$")


@dataclass(frozen=True)
class ByteRange:
    start: int
    end: int  # exclusive

    def content_range(self, size: int) -> str:
        return f"bytes {self.start}-{self.end - 1}/{size}"


class Unsatisfiable(ValueError):
    """A range that lies wholly past the end (416)."""


def byte_range(header: str | None, size: int) -> ByteRange | None:
    """The range `header` asks of a `size`-byte body; None for the whole body (no header, or
    one this server does not serve: several ranges, other units, nonsense, which RFC 9110
    lets a server ignore). Unsatisfiable when it starts at or past the end."""
    match = _RANGE.match(header or "")
    if match is None:
        return None
    first, last = match.groups()
    if first == "" and last == "":
        return None
    if first == "":  # the last N bytes
        suffix = int(last)
        if suffix == 0:
            raise Unsatisfiable(f"bytes */{size}")
        return ByteRange(max(size - suffix, 0), size)
    start = int(first)
    end = size if last == "" else min(int(last) + 1, size)
    if last != "" and int(last) < start:
        return None
    if start >= size:
        raise Unsatisfiable(f"bytes */{size}")
    return ByteRange(start, end)
