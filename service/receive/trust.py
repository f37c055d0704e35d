"""Who may start jobs: a pure decision over the commenter and the configured policy, and the
small TTL cache the service keeps permission lookups in.

Rules: bots never; allow-listed users and members of allow-listed
teams always; everyone else needs write, maintain or admin permission on the repository.
GitHub logins and team slugs are compared without regard to case, as GitHub does.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

WRITE_PERMISSIONS = frozenset({"admin", "maintain", "write"})


@dataclass(frozen=True)
class TrustPolicy:
    """Allow-lists that add to the permission rule. Teams are `org/slug` or a bare `slug`."""

    allowed_users: frozenset[str] = frozenset()
    allowed_teams: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Commenter:
    """The author of a command comment.

    `type` is the webhook's `sender.type` ("User", "Bot", "Organization"); `permission` is the
    collaborator permission API's answer ("admin", "maintain", "write", "triage", "read",
    "none"), or None while unknown; `teams` are the teams the service found the login in.
    """

    login: str
    type: str
    permission: str | None
    teams: frozenset[str] = frozenset()


@dataclass(frozen=True)
class TrustDecision:
    allowed: bool
    reason: str


def is_bot(commenter: Commenter) -> bool:
    """Bots are `sender.type == "Bot"`; GitHub App logins also end in `[bot]`."""
    return commenter.type.lower() == "bot" or commenter.login.lower().endswith("[bot]")


def decide(commenter: Commenter, policy: TrustPolicy) -> TrustDecision:
    """Whether the commenter's commands start jobs, and why (the reason is shown to people)."""
    login = commenter.login
    if is_bot(commenter):
        return TrustDecision(False, f"{login} is a bot; commands from bots are ignored")
    if _allow_listed_user(commenter, policy):
        return TrustDecision(True, f"@{login} is on the allowed users list")
    team = _allow_listed_team(commenter, policy)
    if team is not None:
        return TrustDecision(True, f"@{login} is a member of the allowed team {team}")
    permission = (commenter.permission or "").lower()
    if permission in WRITE_PERMISSIONS:
        return TrustDecision(True, f"@{login} has {permission} permission on the repository")
    if commenter.permission is None:
        return TrustDecision(
            False, f"the permission of @{login} on the repository could not be read"
        )
    shown = permission or "no"
    return TrustDecision(
        False,
        f"@{login} has {shown} permission on the repository; write, maintain or admin is needed",
    )


def needs_permission_lookup(commenter: Commenter, policy: TrustPolicy) -> bool:
    """True when the decision depends on a permission the service has not read yet: never
    for bots or allow-listed users and teams, nor once the permission is known."""
    if is_bot(commenter) or _allow_listed_user(commenter, policy):
        return False
    if _allow_listed_team(commenter, policy) is not None:
        return False
    return commenter.permission is None


def _allow_listed_user(commenter: Commenter, policy: TrustPolicy) -> bool:
    login = commenter.login.lower()
    return any(user.lower().lstrip("@") == login for user in policy.allowed_users)


def _allow_listed_team(commenter: Commenter, policy: TrustPolicy) -> str | None:
    """The first allowed team (sorted) the commenter is in."""
    for allowed in sorted(policy.allowed_teams):
        if any(_same_team(allowed, team) for team in commenter.teams):
            return allowed
    return None


def _same_team(allowed: str, team: str) -> bool:
    """`org/slug` and a bare `slug` name the same team: the service only looks in one org."""
    a, t = allowed.lower(), team.lower()
    if a == t:
        return True
    if "/" not in a or "/" not in t:
        return a.rpartition("/")[2] == t.rpartition("/")[2]
    return False


K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
_MISSING = object()


class TTLCache(Generic[K, V]):
    """A small mapping whose entries expire `ttl_s` seconds after they were set.

    The clock is injectable so tests need no sleeping. At most `maxsize` entries are kept:
    expired ones go first, then the oldest. Safe to share between threads.
    """

    def __init__(
        self,
        ttl_s: float,
        maxsize: int = 1024,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if ttl_s <= 0:
            raise ValueError("ttl_s must be positive")
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self.ttl_s = ttl_s
        self.maxsize = maxsize
        self._clock = clock
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K, default: V | None = None) -> V | None:
        """The live value for `key`, or `default` when absent or expired."""
        with self._lock:
            entry = self._items.get(key)
            if entry is None:
                return default
            expires, value = entry
            if self._clock() >= expires:
                del self._items[key]
                return default
            return value

    def set(self, key: K, value: V) -> None:
        with self._lock:
            now = self._clock()
            self._items.pop(key, None)
            self._items[key] = (now + self.ttl_s, value)
            if len(self._items) > self.maxsize:
                self._evict(now)

    def invalidate(self, key: K) -> None:
        with self._lock:
            self._items.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()

    def __contains__(self, key: object) -> bool:
        return self.get(key, _MISSING) is not _MISSING  # type: ignore[arg-type]

    def __len__(self) -> int:
        """The number of live (unexpired) entries."""
        with self._lock:
            self._evict(self._clock(), expired_only=True)
            return len(self._items)

    def _evict(self, now: float, expired_only: bool = False) -> None:
        for key in [k for k, (expires, _) in self._items.items() if now >= expires]:
            del self._items[key]
        while not expired_only and len(self._items) > self.maxsize:
            self._items.popitem(last=False)
