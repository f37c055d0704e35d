"""Which commit a command approves (pure): the head the pull request had when the command was
written, judged against the PR's recorded head changes, or none.

GitHub does not promise the order of its deliveries, and a command may be processed seconds
after it was written (GitHub slow, the service restarting). Reading the PR's head when the
command is processed would then run whatever was pushed in between, approved by nobody. So the
head the service reads now is bound to the command only when the record says it was already
the head when the command was written; otherwise nothing runs and the reply names the new
commit to approve.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class HeadChange:
    """The PR's head became `sha` at `at`: a push GitHub told of (`seen` false: GitHub's
    clock, like the command's), or a head the service read (`seen` true: the service's clock).
    `opened` marks the PR's first head."""

    sha: str
    at: datetime
    seen: bool = False
    opened: bool = False


@dataclass(frozen=True)
class Approval:
    """`sha` is what the command approves (None: nothing); `head` the PR's head now."""

    sha: str | None
    head: str
    why: str


def approved_head(changes: Sequence[HeadChange], head: str, written_at: datetime) -> Approval:
    """The commit a command written at `written_at` approves, given the PR's head now."""
    later = [c for c in changes if not c.seen and c.at > written_at]
    if later:
        newest = max(later, key=lambda c: c.at)
        return Approval(None, head, f"{newest.sha[:7]} was pushed after the command")
    # A push in the very second of the command may have come after it: not approved.
    tied = [c for c in changes if not c.seen and not c.opened and c.at == written_at]
    if tied:
        return Approval(None, head, f"{tied[-1].sha[:7]} was pushed as the command was written")
    before = [c for c in changes if c.at <= written_at]
    if before:
        # The latest change before the command; a push wins a tie with a read of the head.
        current = max(before, key=lambda c: (c.at, not c.seen))
        if current.sha == head:
            return Approval(head, head, "the head when the command was written")
        return Approval(None, head, f"the head moved to {head[:7]} after the command")
    if any(c.sha != head for c in changes):
        return Approval(None, head, f"the head moved to {head[:7]} after the command")
    # Nothing recorded before the command: a pull request the service has no history of. Its
    # head now is the best knowledge there is; from here on its changes are recorded.
    return Approval(head, head, "the head when the service first saw the pull request")
