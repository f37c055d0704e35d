"""What the outbox leaves out while an installation's hourly budget of GitHub calls runs low.

GitHub grants an App installation a budget of REST calls an hour (5,000 for most) and states
what is left, and when the hour starts again, in every answer's headers. Under a heavy load
the service's calls would spend it and then pause everything until the reset, verdicts
included. While the budget is low (less than `reserve` of it left, or less than half of what
spending it evenly over the hour would have left by now), the calls that only show a step on
the way are left out, so what remains goes to answers and verdicts: the 👀 on a command (its
comment answers it as well), and an edit of a result comment or check run that already shows
its job while that job has not ended (a later edit, the verdict's, is always queued: whatever
ends a job updates both). Nothing else is left out: a command's first answer, replies, commit
statuses and every verdict still go out.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime

WINDOW_S = 3600  # GitHub's primary limit counts calls an hour
# How the outbox records a 👀 it left out (the soak reads it back from the outbox's rows).
REACTION_LEFT_OUT = "reaction left out"
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


def skippable(kind: str, *, exists: bool, ended: bool) -> bool:
    """Whether an outbox item of `kind` may be left out while the budget is low: a reaction,
    or an update of a comment or check run that `exists` on GitHub whose job has not `ended`."""
    if kind == "reaction":
        return True
    if kind in ("comment", "check"):
        return exists and not ended
    return False
