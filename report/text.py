"""How the report writes its numbers, sizes, counts and marks: the same few formats in the
headline, the table and the notes."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from report.markdown import clip, plural
from workflows.models import AccuracyResult, BenchmarkRow

SLOWER = "📉"  # next to the accuracy verdict: the performance got worse
FASTER = "📈"
NOISY = "〰️"


def row_label(row: BenchmarkRow) -> str:
    return f"{row.dtype} [{', '.join(str(n) for n in row.size)}]"


def counts(acc: AccuracyResult) -> str:
    """`2 failed, 1 error, 67 passed, 3 skipped` (zero counts left out but for passed)."""
    words = []
    if acc.failed:
        words.append(f"{acc.failed} failed")
    if acc.errors:
        words.append(plural(acc.errors, "error"))
    words.append(f"{acc.passed} passed")
    if acc.skipped:
        words.append(f"{acc.skipped} skipped")
    return ", ".join(words)


def micros(value: float) -> str:
    return f"{value:,.0f} µs" if value >= 10 else f"{value:.1f} µs"


def shape(size: Sequence[int]) -> str:
    return clip(", ".join(str(n) for n in size), 60)


def millis(value: float) -> str:
    return f"{value:.6f}"


def times(value: float) -> str:
    return f"{value:.3f}x"


def arrow(before: float | None, after: float, fmt: Callable[[float], str]) -> str:
    return f"{fmt(before)} → {fmt(after)}" if before is not None else fmt(after)


def size_text(row: BenchmarkRow) -> str:
    """The row's size, with its output size where it has one: `1, 8 → 1, 4`."""
    size = shape(row.size)
    if row.output_size:
        size += f" → {shape(row.output_size)}"
    return size
