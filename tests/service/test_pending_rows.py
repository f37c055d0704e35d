"""A worker's round reads what it needs to choose the next row, not the rows: while GitHub's
hourly budget is spent hundreds of deliveries wait, every delivery kicks a round, and a round
that read each waiting row whole (its payload parsed, about 30 KiB of Python objects for a
comment's) held the backlog's size in memory, which the allocator kept."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

from service.db.engine import Database
from service.db.leases import Due, LeasedRows
from service.db.models import Delivery, OutboxItem

# A comment delivery's payload, about as large as GitHub's (5 KB of JSON, 21 KiB parsed).
PAYLOAD = {
    "action": "created",
    "comment": {"id": 1, "body": "/test add:cpu", "user": {"login": "maint-1", "id": 2}},
    "repository": {"full_name": "acme/soak-a", **{f"{k}_url": "x" * 40 for k in range(60)}},
    "issue": {"number": 3, "labels": [{"name": f"label-{i}", "id": i} for i in range(40)]},
}
WAITING = 300


def test_a_round_reads_the_waiting_rows_ids_not_their_payloads(
    tmp_path: Path, sqlite_at_head: Path
) -> None:
    path = tmp_path / "ondemand.db"
    path.write_bytes(sqlite_at_head.read_bytes())
    db = Database.connect(f"sqlite:///{path}")
    try:
        with db.writes() as session, session.begin():
            for i in range(WAITING):
                session.add(Delivery(delivery_id=f"d-{i}", event="issue_comment", payload=PAYLOAD))
                session.add(OutboxItem(kind="reply", key=f"acme/soak-a#{i % 7}", payload=PAYLOAD))
        deliveries, items = LeasedRows(db, Delivery), LeasedRows(db, OutboxItem)
        deliveries.pending()  # the statement compiled and cached before measuring
        tracemalloc.start()
        try:
            waiting = deliveries.pending()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert len(waiting) == WAITING and all(isinstance(d, Due) for d in waiting)
        # Whole rows took 26 KiB each here (8 MiB); what a round needs is a few hundred bytes.
        assert peak < WAITING * 2048, f"{peak / WAITING:.0f} bytes a waiting row"
        assert [d.id for d in waiting] == sorted(d.id for d in waiting)  # oldest first
        queued = items.pending()
        assert {d.key for d in queued} == {f"acme/soak-a#{k}" for k in range(7)}
        first = items.take(queued[0].id)  # a try reads its row whole
        assert first is not None and first.payload == PAYLOAD
        assert items.due_at(queued[1]) == queued[1].next_attempt_at
    finally:
        db.dispose()
