"""The one retry policy: exponential backoff with jitter, capped, and a server's own word
(`Retry-After`, a rate-limit reset) taking precedence.

The service's inbox and outbox and the runner daemon all wait with it, so a GitHub outage, a
service restart and a flaky network are all waited out the same way.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """Delay before the next try after `failures` consecutive failures.

    The raw delay doubles from `base_s` up to `cap_s`; with `jitter` the wait is drawn
    between half of it and all of it, so that many clients failing together do not retry
    together, while a retry never comes sooner than half the planned wait.
    """

    base_s: float = 1.0
    cap_s: float = 300.0
    jitter: bool = True

    def delay(
        self,
        failures: int,
        retry_after: float | None = None,
        uniform: Callable[[float, float], float] = random.uniform,
    ) -> float:
        """Seconds to wait; `retry_after` (what the server asked for) wins when given."""
        if retry_after is not None:
            return max(0.0, retry_after)
        raw = min(self.cap_s, self.base_s * 2.0 ** max(0, failures - 1))
        return uniform(raw / 2, raw) if self.jitter else raw


class Backoff:
    """A policy with its failure count: `next()` after a failure, `reset()` after a success."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.failures = 0

    def next(self, retry_after: float | None = None) -> float:
        self.failures += 1
        return self.policy.delay(self.failures, retry_after)

    def reset(self) -> None:
        self.failures = 0
