"""Who may start jobs, and the TTL cache the permission lookups live in."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.receive.trust import (
    Commenter,
    TrustPolicy,
    TTLCache,
    decide,
    is_bot,
    needs_permission_lookup,
)

NOBODY = TrustPolicy()


def user(
    permission: str | None, login: str = "dongxu-h", teams: frozenset[str] = frozenset()
) -> Commenter:
    return Commenter(login=login, type="User", permission=permission, teams=teams)


@pytest.mark.parametrize("permission", ["admin", "maintain", "write", "WRITE"])
def test_write_maintain_and_admin_start_jobs(permission: str) -> None:
    decision = decide(user(permission), NOBODY)
    assert decision.allowed
    assert permission.lower() in decision.reason


@pytest.mark.parametrize("permission", ["triage", "read", "none", ""])
def test_lower_permissions_are_refused_and_told_what_is_needed(permission: str) -> None:
    decision = decide(user(permission), NOBODY)
    assert not decision.allowed
    assert "write, maintain or admin" in decision.reason
    assert "@dongxu-h" in decision.reason


def test_unknown_permission_is_refused() -> None:
    decision = decide(user(None), NOBODY)
    assert not decision.allowed
    assert "could not be read" in decision.reason


@pytest.mark.parametrize(
    ("login", "type_"),
    [("github-actions[bot]", "Bot"), ("renovate[bot]", "User"), ("ci-robot", "Bot")],
)
def test_bots_are_always_refused_even_when_allow_listed_or_admin(login: str, type_: str) -> None:
    bot = Commenter(login=login, type=type_, permission="admin", teams=frozenset({"core"}))
    policy = TrustPolicy(allowed_users=frozenset({login}), allowed_teams=frozenset({"core"}))
    assert is_bot(bot)
    decision = decide(bot, policy)
    assert not decision.allowed
    assert "bot" in decision.reason
    assert not needs_permission_lookup(bot, policy)


def test_allow_listed_user_needs_no_permission_and_matches_any_case() -> None:
    policy = TrustPolicy(allowed_users=frozenset({"@Yukun-Cui"}))
    author = user(None, login="yukun-cui")
    assert decide(author, policy).allowed
    assert "allowed users" in decide(author, policy).reason
    assert not needs_permission_lookup(author, policy)
    # the allow-list adds; it does not take away from people with write permission
    assert decide(user("write", login="someone-else"), policy).allowed
    assert not decide(user("read", login="someone-else"), policy).allowed


@pytest.mark.parametrize(
    ("allowed", "membership", "ok"),
    [
        ("kernel-team", "kernel-team", True),
        ("Kernel-Team", "kernel-team", True),
        ("flagos/kernel-team", "kernel-team", True),
        ("kernel-team", "flagos/kernel-team", True),
        ("flagos/kernel-team", "flagos/kernel-team", True),
        ("flagos/kernel-team", "other/kernel-team", False),
        ("kernel-team", "kernel-team-2", False),
    ],
)
def test_allow_listed_teams(allowed: str, membership: str, ok: bool) -> None:
    policy = TrustPolicy(allowed_teams=frozenset({allowed}))
    author = user("read", teams=frozenset({membership}))
    decision = decide(author, policy)
    assert decision.allowed is ok
    if ok:
        assert allowed in decision.reason


def test_permission_lookup_is_needed_only_while_it_decides() -> None:
    assert needs_permission_lookup(user(None), NOBODY)
    assert not needs_permission_lookup(user("read"), NOBODY)
    team_policy = TrustPolicy(allowed_teams=frozenset({"core"}))
    assert not needs_permission_lookup(user(None, teams=frozenset({"core"})), team_policy)
    assert needs_permission_lookup(user(None, teams=frozenset({"docs"})), team_policy)


@given(
    login=st.text(min_size=1, max_size=40),
    type_=st.sampled_from(["User", "Bot", "Organization", "bot"]),
    permission=st.none()
    | st.sampled_from(["admin", "maintain", "write", "triage", "read", "none"]),
    users=st.frozensets(st.text(max_size=10), max_size=3),
    teams=st.frozensets(st.text(max_size=10), max_size=3),
)
def test_decision_properties(
    login: str,
    type_: str,
    permission: str | None,
    users: frozenset[str],
    teams: frozenset[str],
) -> None:
    commenter = Commenter(login=login, type=type_, permission=permission, teams=teams)
    policy = TrustPolicy(allowed_users=users, allowed_teams=teams)
    decision = decide(commenter, policy)
    assert decision.reason
    if is_bot(commenter):
        assert not decision.allowed
    elif permission in ("admin", "maintain", "write"):
        assert decision.allowed
    # a lookup is asked for only when the permission is unknown and could change the answer
    if needs_permission_lookup(commenter, policy):
        assert permission is None and not decision.allowed


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_ttl_cache_expires_entries_after_ttl() -> None:
    clock = FakeClock()
    cache: TTLCache[tuple[str, str], str] = TTLCache(ttl_s=60, clock=clock)
    cache.set(("o/r", "alice"), "write")
    clock.now += 59.9
    assert cache.get(("o/r", "alice")) == "write"
    assert ("o/r", "alice") in cache and len(cache) == 1
    clock.now += 0.1
    assert cache.get(("o/r", "alice")) is None
    assert ("o/r", "alice") not in cache and len(cache) == 0


def test_ttl_cache_set_again_renews_and_invalidate_and_clear_drop() -> None:
    clock = FakeClock()
    cache: TTLCache[str, str] = TTLCache(ttl_s=10, clock=clock)
    cache.set("a", "read")
    clock.now += 8
    cache.set("a", "write")
    clock.now += 8
    assert cache.get("a") == "write"
    assert cache.get("b", "default") == "default"
    cache.invalidate("a")
    assert cache.get("a") is None
    cache.set("x", "1")
    cache.clear()
    assert len(cache) == 0


def test_ttl_cache_keeps_at_most_maxsize_dropping_expired_then_oldest() -> None:
    clock = FakeClock()
    cache: TTLCache[int, int] = TTLCache(ttl_s=10, maxsize=3, clock=clock)
    cache.set(1, 1)
    clock.now += 6
    cache.set(2, 2)
    cache.set(3, 3)
    clock.now += 5  # 1 has expired now
    cache.set(4, 4)
    assert [cache.get(k) for k in (1, 2, 3, 4)] == [None, 2, 3, 4]
    cache.set(5, 5)  # nothing expired: the oldest (2) goes
    assert [cache.get(k) for k in (2, 3, 4, 5)] == [None, 3, 4, 5]


def test_ttl_cache_rejects_nonsense_settings() -> None:
    with pytest.raises(ValueError, match="ttl_s"):
        TTLCache(ttl_s=0)
    with pytest.raises(ValueError, match="maxsize"):
        TTLCache(ttl_s=1, maxsize=0)


def test_ttl_cache_is_safe_across_threads() -> None:
    cache: TTLCache[int, int] = TTLCache(ttl_s=60, maxsize=50)

    def work(base: int) -> None:
        for i in range(2000):
            cache.set(base + i % 100, i)
            cache.get(base + (i * 7) % 100)
            len(cache)

    threads = [threading.Thread(target=work, args=(n * 1000,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cache) == 50
