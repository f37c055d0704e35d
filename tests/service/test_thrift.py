"""What the outbox may leave out while an installation's hourly budget runs low."""

from __future__ import annotations

import pytest

from service.report.thrift import Budget, skippable


@pytest.mark.parametrize(
    ("remaining", "limit", "reserve", "low"),
    [(999, 5000, 0.2, True), (1000, 5000, 0.2, False), (0, 5000, 0.2, True),
     (0, 5000, 0.0, False), (10, 0, 0.2, False)],
)  # fmt: skip
def test_low_is_under_the_reserves_share_of_the_limit(
    remaining: int, limit: int, reserve: float, low: bool
) -> None:
    assert Budget(remaining, limit, 0).low(reserve) is low


def test_spending_the_hour_in_minutes_is_low_long_before_the_reserve() -> None:
    """With 50 minutes of the hour to go, an even pace would have left 4,167 of 5,000: below
    half of that (2,083) is low; a burst that left 3,000 is not, nor is anything at the
    hour's end above the reserve."""
    now = 1_000_000.0
    assert Budget(2000, 5000, int(now) + 3000).low(0.2, now)
    assert not Budget(3000, 5000, int(now) + 3000).low(0.2, now)
    assert not Budget(1001, 5000, int(now) + 10).low(0.2, now)
    assert not Budget(10, 5000, int(now) + 3000).low(0.0, now)  # no reserve: never


def test_only_reactions_and_edits_on_the_way_may_be_left_out() -> None:
    assert skippable("reaction", exists=False, ended=False)
    for kind in ("comment", "check"):
        assert skippable(kind, exists=True, ended=False)  # running, progress
        assert not skippable(kind, exists=False, ended=False)  # a command's first answer
        assert not skippable(kind, exists=True, ended=True)  # the verdict
    for kind in ("reply", "note", "status"):
        assert not skippable(kind, exists=True, ended=False)


def test_a_budget_says_what_is_left_and_until_when() -> None:
    assert str(Budget(12, 5000, 0)) == "12 of 5000 calls left this hour"
    assert str(Budget(12, 5000, 3600)) == "12 of 5000 calls left this hour, until 01:00:00 UTC"
