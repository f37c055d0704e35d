"""How much of each list or log a comment shows, from the most to the least: the renderer
tries each level in turn until the comment fits GitHub's limit."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """How much of each list or log a comment shows."""

    failures: int
    message_chars: int
    traceback_lines: int
    traceback_chars: int
    log_lines: int
    log_chars: int
    rows: int
    skips: int
    history: int


LEVELS = (
    Limits(20, 500, 40, 3000, 60, 6000, 200, 30, 20),
    Limits(5, 300, 15, 1200, 30, 2500, 60, 10, 10),
    Limits(0, 200, 0, 0, 10, 800, 20, 5, 3),
)
