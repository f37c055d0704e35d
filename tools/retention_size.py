"""What retention costs and what it does to the database's size, on SQLite and PostgreSQL.

    python -m tools.retention_size [--jobs 10000] [--chunks 4] [--chunk-bytes 4096]
                                   [--db sqlite,postgres]

Per database: seeds `--jobs` old finished jobs, each with a log of `--chunks` chunks, plus
recent and active jobs, deliveries and outbox items (`tests/service/seeding.py`, bulk
inserts), then prints how long one prune pass took (and its longest transaction: how long
it held SQLite's write lock at most) and the database's size after the first insert, after
the prune, and after the same insert again. SQLite is measured as created
(freed pages stay in the file and are reused) and made incremental (`PRAGMA auto_vacuum =
INCREMENTAL; VACUUM`: the pruner gives freed pages back); PostgreSQL without a VACUUM between
prune and insert (what happens before autovacuum comes by) and with one (after it has).
Sizes: the SQLite file and its WAL after a truncating checkpoint; every PostgreSQL table of the
schema with its indexes and TOAST.
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import psycopg
from sqlalchemy import Engine, event, text

from service.db.engine import Database
from service.db.migrate import upgrade
from service.queue.retention import Pruner, Retention
from tests.service.seeding import counts, seed

PG_CONNINFO = "host=127.0.0.1 port=5432 dbname=test user=postgres connect_timeout=3"
NOW = datetime.now(UTC)


def mib(size: int) -> str:
    return f"{size / 2**20:.1f} MiB"


def sqlite_bytes(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


def pg_bytes(db: Database) -> int:
    with db.engine.connect() as conn:
        return int(
            conn.execute(
                text(
                    "SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname = current_schema() AND c.relkind = 'r'"
                )
            ).scalar_one()
        )


@contextmanager
def longest_transaction(engine: Engine) -> Iterator[list[float]]:
    """The longest committed transaction on `engine` while the block runs, in seconds."""
    began: dict[int, float] = {}
    longest = [0.0]

    def begin(conn: object) -> None:
        began[id(conn)] = time.perf_counter()

    def commit(conn: object) -> None:
        if (start := began.pop(id(conn), None)) is not None:
            longest[0] = max(longest[0], time.perf_counter() - start)

    event.listen(engine, "begin", begin)
    event.listen(engine, "commit", commit)
    try:
        yield longest
    finally:
        event.remove(engine, "begin", begin)
        event.remove(engine, "commit", commit)


@contextmanager
def pg_schema() -> Iterator[str]:
    schema = f"retention_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:5432/test?options=-csearch_path%3D{schema}"
    finally:
        with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def measure(
    label: str, url: str, size: Callable[[Database], int], args: argparse.Namespace,
    between: Callable[[Database], None] = lambda _db: None,
) -> None:  # fmt: skip
    """Seed, prune, seed again; print the pass's time and the sizes."""
    db = Database.connect(url)
    upgrade(db.engine)
    shape = {"old": args.jobs, "chunks": args.chunks, "chunk_bytes": args.chunk_bytes}
    try:
        started = time.monotonic()
        seed(db, NOW, tag="a", **shape)
        seeded_s = time.monotonic() - started
        rows = counts(db)
        first = size(db)
        pruner = Pruner(db, Retention(), threading.Event())
        started = time.monotonic()
        with longest_transaction(db.engine) as longest:
            done = pruner.prune(NOW)
        pruned_s = time.monotonic() - started
        after_prune = size(db)
        between(db)
        seed(db, NOW, tag="b", **shape)
        again = size(db)
    finally:
        db.dispose()
    print(
        f"{label}: seeded {rows['jobs']} jobs, {rows['log_chunks']} log chunks, "
        f"{rows['deliveries']} deliveries, {rows['outbox']} outbox items in {seeded_s:.1f} s; "
        f"one pass pruned {done.jobs} jobs, {done.logs} logs ({done.chunks} chunks), "
        f"{done.deliveries} deliveries, {done.outbox} outbox items in {pruned_s:.1f} s "
        f"(longest transaction {longest[0] * 1000:.0f} ms)"
    )
    print(
        f"{label}: size after insert {mib(first)}, after prune {mib(after_prune)}, "
        f"after the same insert again {mib(again)} ({again / first:.2f}x the first)"
    )


def vacuum(db: Database) -> None:
    with db.engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.exec_driver_sql("VACUUM jobs, log_chunks, deliveries, outbox")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--chunks", type=int, default=4)
    parser.add_argument("--chunk-bytes", type=int, default=4096)
    parser.add_argument("--db", default="sqlite,postgres")
    args = parser.parse_args()
    wanted = set(args.db.split(","))
    if "sqlite" in wanted:
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "plain.db"
            measure("SQLite", f"sqlite:///{path}", lambda _db: sqlite_bytes(path), args)
            path = Path(tmp) / "incremental.db"
            made = Database.connect(f"sqlite:///{path}")
            upgrade(made.engine)
            made.dispose()
            with sqlite3.connect(path) as conn:
                conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
                conn.execute("VACUUM")
            url = f"sqlite:///{path}"
            measure("SQLite, incremental", url, lambda _db: sqlite_bytes(path), args)
    if "postgres" in wanted:
        with pg_schema() as url:
            measure("PostgreSQL, no VACUUM yet", url, pg_bytes, args)
        with pg_schema() as url:
            measure("PostgreSQL, VACUUM (as autovacuum)", url, pg_bytes, args, between=vacuum)


if __name__ == "__main__":
    main()
