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

# How the outbox records a 👀 it left out (the soak reads it back from the outbox's rows).
REACTION_LEFT_OUT = "reaction left out"


def skippable(kind: str, *, exists: bool, ended: bool) -> bool:
    """Whether an outbox item of `kind` may be left out while the budget is low: a reaction,
    or an update of a comment or check run that `exists` on GitHub whose job has not `ended`."""
    if kind == "reaction":
        return True
    if kind in ("comment", "check"):
        return exists and not ended
    return False
