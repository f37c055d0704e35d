"""What a failed GitHub call means: `GitHubError` (whether and when to retry), a refusal for
a permission the App lacks (`MissingPermission`, naming it), a file too large to read, and
GitHub's rate-limit rules read from an answer (`classify`). Pure: the client raises these."""

from __future__ import annotations

from service.github.permissions import accepted, find

# Answers that will not change on retry: the item is given up (logged), not retried forever.
PERMANENT_STATUSES = frozenset({400, 401, 404, 410, 422})
# GitHub's advice for a secondary rate limit that names no time: wait at least a minute.
SECONDARY_LIMIT_WAIT_S = 60.0
_RATE_LIMIT_WORDS = ("rate limit", "abuse")


class GitHubError(Exception):
    """A failed call: `status` None for network errors; `retry_after` seconds when GitHub said
    (or when its rate-limit rules say, or until the next try of an outage); `rate_limited` for
    any rate or abuse limit; `unavailable` while GitHub is unreachable or failing."""

    def __init__(
        self,
        message: str,
        status: int | None,
        retry_after: float | None = None,
        rate_limited: bool = False,
        unavailable: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after
        self.rate_limited = rate_limited
        self.unavailable = unavailable

    @property
    def permanent(self) -> bool:
        """A retry will get the same answer: a 4xx that is not a rate limit (a 403 that is not
        one refuses the call; one for a missing permission is a `MissingPermission`, which
        waits for it)."""
        if self.rate_limited:
            return False
        return self.status in PERMANENT_STATUSES or self.status == 403


class MissingPermission(GitHubError):
    """GitHub refused a call for a permission the App's installation (or the token) lacks:
    `permission` and `level` as GitHub's API spells them (`contents`, `read`). Not permanent:
    it comes back when an owner grants it, so what needed it waits rather than being dropped."""

    def __init__(self, message: str, permission: str, level: str) -> None:
        super().__init__(message, 403)
        self.permission = permission
        self.level = level

    @property
    def key(self) -> str:
        """`contents:read`, as a parked delivery or outbox item records what it waits for."""
        return f"{self.permission}:{self.level}"

    @property
    def permanent(self) -> bool:
        return False


def missing_permission(headers: dict[str, str], need: str | None) -> tuple[str, str]:
    """Which permission a refused call lacked: the one the call needs (`need`, e.g.
    `contents:read`) when GitHub's `X-Accepted-GitHub-Permissions` names it or says nothing;
    else the first it names that the App asks for, else the first it names."""
    named = accepted(
        {k.lower(): v for k, v in headers.items()}.get("x-accepted-github-permissions")
    )
    wanted = tuple(need.split(":", 1)) if need else None
    if wanted is not None and (not named or wanted in named):
        return wanted[0], wanted[1]
    ours = [pair for pair in named if find(*pair) is not None]
    return (ours or named or [("unknown", "read")])[0]


class FileTooLarge(GitHubError):
    """A file whose content GitHub's contents API leaves out (over 1 MB): `size` in bytes.
    Permanent: the same file reads the same way again."""

    def __init__(self, message: str, size: int) -> None:
        super().__init__(message, 413)
        self.size = size

    @property
    def permanent(self) -> bool:
        return True


def classify(
    status: int,
    message: str,
    headers: dict[str, str],
    now: float,
    secondary_wait_s: float = SECONDARY_LIMIT_WAIT_S,
) -> tuple[bool, float | None]:
    """(rate limited, seconds to wait) for a failed answer, by GitHub's rules: `Retry-After`
    when given; the reset time when no requests remain; at least a minute for a secondary or
    abuse limit that says neither (a 403 or 429 whose message names the limit)."""
    headers = {k.lower(): v for k, v in headers.items()}
    wait: float | None = None
    if "retry-after" in headers:
        wait = _seconds(headers["retry-after"])
    elif headers.get("x-ratelimit-remaining") == "0" and "x-ratelimit-reset" in headers:
        reset = _seconds(headers["x-ratelimit-reset"])
        wait = None if reset is None else max(0.0, reset - now)
    if status not in (403, 429):
        return False, wait
    named = any(word in message.lower() for word in _RATE_LIMIT_WORDS)
    if wait is None and (named or status == 429):
        wait = secondary_wait_s
    return wait is not None, wait


def _seconds(value: str) -> float | None:
    try:
        return max(0.0, float(value))
    except ValueError:
        return None
