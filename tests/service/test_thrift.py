"""What the outbox may leave out while an installation's hourly budget runs low."""

from __future__ import annotations

import pytest

from service.github.budget import Budget
from service.publish.low_budget import skippable


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


@pytest.mark.postgres
def test_the_soak_reads_back_the_reactions_the_outbox_left_out(pg_url: str) -> None:
    """The soak's reader finds a 👀 left out by the words the outbox records it with, and
    only those (a sent one is not)."""
    import sqlalchemy
    from sqlalchemy.engine import make_url
    from sqlalchemy.orm import Session

    from service.db.migrate import upgrade
    from service.db.models import OutboxItem
    from service.publish.low_budget import REACTION_LEFT_OUT
    from tools.soak.collect import reactions_left_out

    engine = sqlalchemy.create_engine(pg_url)
    upgrade(engine)
    with Session(engine) as session, session.begin():
        for key, comment_id, outcome in [
            ("a", 42, f"{REACTION_LEFT_OUT} ({Budget(3, 5000, 0)})"),
            ("b", 43, "reacted"),
        ]:
            payload = {"repo": "acme/k", "comment_id": comment_id, "content": "eyes"}
            session.add(OutboxItem(kind="reaction", key=key, payload=payload, outcome=outcome))
    engine.dispose()
    conninfo = make_url(pg_url).set(drivername="postgresql").render_as_string(False)
    assert reactions_left_out(conninfo) == [42]
