"""The Python memory one inbox round's read of the waiting deliveries takes at its peak, by how
many wait: the rows read whole (what a round read before `LeasedRows.pending` read only ids,
keys, retry times and locks) against `pending()`. Measured with tracemalloc on a SQLite file.

    python -m tools.soak.roundmem [--payload FILE] [--waiting 100,500,1000,2000]

FILE is one delivery's JSON payload (default: a comment delivery of about 5 KB)."""

from __future__ import annotations

import argparse
import json
import tempfile
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import select

from service.db.engine import Database
from service.db.leases import LeasedRows
from service.db.migrate import upgrade
from service.db.models import Delivery


def peak(read: Callable[[], list[Any]]) -> tuple[int, int]:
    """(rows read, peak bytes held while reading them)."""
    read()  # statements compiled and cached first
    tracemalloc.start()
    try:
        found = len(read())
        return found, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--payload", type=Path)
    parser.add_argument("--waiting", default="100,500,1000,2000")
    args = parser.parse_args(argv)
    if args.payload is not None:
        payload = json.loads(args.payload.read_text())
    else:
        from tests.service.test_pending_rows import PAYLOAD as payload
    with tempfile.TemporaryDirectory() as directory:
        db = Database.connect(f"sqlite:///{directory}/ondemand.db")
        upgrade(db.engine)
        rows = LeasedRows(db, Delivery)

        def whole() -> list[Delivery]:
            with db.reads() as session:
                query = select(Delivery).where(Delivery.done_at.is_(None)).order_by(Delivery.id)
                return list(session.scalars(query))

        made = 0
        print(f"payload {len(json.dumps(payload))} bytes of JSON")
        for waiting in (int(n) for n in args.waiting.split(",")):
            with db.writes() as session, session.begin():
                for i in range(made, waiting):
                    session.add(Delivery(delivery_id=f"d-{i}", event="issue_comment",
                                         payload=payload))  # fmt: skip
            made = waiting
            cells = []
            for name, read in (("whole rows", whole), ("pending()", rows.pending)):
                found, held = peak(read)
                assert found == waiting
                cells.append(f"{name} {held / 2**20:6.2f} MiB ({held / waiting / 1024:4.1f} "
                             "KiB a row)")  # fmt: skip
            print(f"{waiting:5d} waiting: " + " | ".join(cells))
        db.dispose()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
