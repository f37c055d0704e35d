"""An installation's hourly budget of GitHub calls, as GitHub states it in every answer's
headers: what is left, of how many, and when the hour starts again."""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

WINDOW_S = 3600  # GitHub's primary limit counts calls an hour
PACE = 0.5  # low below this share of what an even pace over the hour would have left


@dataclass(frozen=True)
class Budget:
    """An installation's hourly budget as GitHub's last answer stated it."""

    remaining: int
    limit: int
    reset: int  # when the window starts again, seconds since the epoch (0: not stated)

    def low(self, reserve: float, now: float | None = None) -> bool:
        """Whether less than `reserve` (a share of the limit) is left, or, with a reset
        stated, less than PACE of what an even pace would have left at `now` (a burst that
        would spend the hour's budget in minutes); never with no reserve."""
        if self.limit <= 0 or reserve <= 0:
            return False
        floor = self.limit * reserve
        if self.reset > 0:
            now = time.time() if now is None else now
            share = min(1.0, max(0.0, (self.reset - now) / WINDOW_S))
            floor = max(floor, self.limit * share * PACE)
        return self.remaining < floor

    def __str__(self) -> str:
        text = f"{self.remaining} of {self.limit} calls left this hour"
        if self.reset > 0:
            text += f", until {datetime.fromtimestamp(self.reset, UTC):%H:%M:%S} UTC"
        return text
