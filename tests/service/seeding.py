"""A database of many jobs, logs, deliveries and outbox items, written with bulk inserts (not
through the service: 10,000 jobs in a second or two), each row dated relative to `now`, and
what retention must leave of it. Used by tests/service/test_retention.py and
tools/retention_size.py."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import func, insert, select

from service.db.engine import Database
from service.db.models import Delivery, Job, LogChunk, OutboxItem
from workflows.models import JobStatus

FINAL = ("succeeded", "failed", "errored", "cancelled", "superseded", "timed_out")
VERDICTS = frozenset({"succeeded", "failed"})
ROWS_PER_INSERT = 2000  # rows per executemany: bounded parameter lists and memory


@dataclass
class Seeded:
    """The ids written, by what retention must do with them."""

    gone: set[int] = field(default_factory=set)  # old jobs retention deletes
    kept_forever: set[int] = field(default_factory=set)  # old, but their target's newest verdict
    log_pruned: set[int] = field(default_factory=set)  # jobs kept, their logs deleted
    untouched: set[int] = field(default_factory=set)  # recent jobs, and old active ones
    chunks_kept: int = 0  # log chunks of the untouched jobs
    deliveries_kept: int = 0
    outbox_kept: int = 0
    deliveries_gone: int = 0
    outbox_gone: int = 0

    @property
    def jobs_kept(self) -> set[int]:
        return self.kept_forever | self.log_pruned | self.untouched


def _job(
    op: str,
    backend: str,
    status: str,
    created: datetime,
    finished: datetime | None,
    log_size: int,
    pr: int = 1,
    sha: str = "a" * 40,
) -> dict[str, Any]:
    return {
        "repo": "octo/kernels",
        "clone_url": "/tmp/none.git",
        "pr_number": pr,
        "sha": sha,
        "op": op,
        "backend": backend,
        "bench": True,
        "compare": True,
        "status": status,
        "attempt": 1,
        "cancel_requested": False,
        "private": False,
        "threshold": 0.1,
        "gate": "inform",
        "log_size": log_size,
        "created_at": created,
        "started_at": None if status == JobStatus.queued else created,
        "finished_at": finished,
        "result": {"status": status, "sha": "a" * 40} if status in VERDICTS else None,
    }


def _batches(rows: Iterable[dict[str, Any]]) -> Iterable[list[dict[str, Any]]]:
    it = iter(rows)
    while batch := list(itertools.islice(it, ROWS_PER_INSERT)):
        yield batch


def _insert_jobs(db: Database, rows: list[dict[str, Any]], chunks: int, blob: bytes) -> list[int]:
    """Insert `rows` in order (ids grow with them) and `chunks` log chunks of `blob` for each
    row with a log; returns their ids."""
    ids: list[int] = []
    with db.writes() as session, session.begin():
        for batch in _batches(rows):
            stmt = insert(Job).returning(Job.id, sort_by_parameter_order=True)
            ids.extend(session.scalars(stmt, batch).all())
        logged = (i for i, row in zip(ids, rows, strict=True) if row["log_size"])
        pieces = (
            {"job_id": i, "offset": n * len(blob), "data": blob}
            for i in logged
            for n in range(chunks)
        )
        for batch in _batches(pieces):
            session.execute(insert(LogChunk), batch)
    return ids


def seed(
    db: Database,
    now: datetime,
    *,
    old: int = 10_000,
    middle: int = 300,
    recent: int = 300,
    active: int = 40,
    targets: int = 50,
    chunks: int = 3,
    chunk_bytes: int = 256,
    done_rows: int = 2_000,
    job_days: float = 90,
    log_days: float = 30,
    done_days: float = 14,
    tag: str = "",
) -> Seeded:
    """`old` jobs finished before the job cutoff (status cycling through every final one, over
    `targets` (operator, backend) pairs, half of which run nothing later), `middle` finished
    between the log and the job cutoffs, `recent` within the log cutoff, `active` old queued
    and running ones (created before every cutoff); each finished or running job with a log
    of `chunks` chunks. Then `done_rows` old and 50 recent handled deliveries and delivered
    outbox items, 50 pending of each (received long ago), and pull requests' notes (several
    old versions each), their unique keys marked with `tag`. Returns what retention at these
    days must delete and keep."""
    blob = random.Random(0).randbytes(
        chunk_bytes
    )  # incompressible: PostgreSQL's TOAST keeps it whole
    size = chunks * len(blob)
    pairs = [(f"op{n:02d}", ("cpu", "nvidia")[n % 2]) for n in range(targets)]
    later_pairs = pairs[: targets // 2]  # the rest only ran long ago: their newest stays
    rows: list[dict[str, Any]] = []
    kinds: list[str] = []
    job_cut = now - timedelta(days=job_days)
    log_cut = now - timedelta(days=log_days)
    for n in range(old):
        op, backend = pairs[n % len(pairs)]
        finished = job_cut - timedelta(days=300) + timedelta(minutes=n)
        rows.append(_job(op, backend, FINAL[n % len(FINAL)], finished, finished, size))
        kinds.append("old")
    for n in range(middle):
        op, backend = later_pairs[n % len(later_pairs)]
        finished = job_cut + (log_cut - job_cut) * (n + 1) / (middle + 1)
        rows.append(_job(op, backend, FINAL[n % len(FINAL)], finished, finished, size))
        kinds.append("middle")
    for n in range(active):
        status = JobStatus.queued if n % 2 else JobStatus.running
        created = job_cut - timedelta(days=200)
        logged = size if status == JobStatus.running else 0
        sha = (tag + "a" * 40)[:40]  # another seeding's active jobs are other commits'
        rows.append(_job("op00", "cpu", status, created, None, logged, pr=1000 + n, sha=sha))
        kinds.append("active")
    for n in range(recent):
        op, backend = later_pairs[n % len(later_pairs)]
        finished = log_cut + (now - log_cut) * (n + 1) / (recent + 2)
        rows.append(_job(op, backend, FINAL[n % len(FINAL)], finished, finished, size))
        kinds.append("recent")
    ids = _insert_jobs(db, rows, chunks, blob)

    newest: dict[tuple[str, str], int] = {}
    for i, row in zip(ids, rows, strict=True):
        if row["status"] in VERDICTS:
            newest[(row["op"], row["backend"])] = i  # ids grow with the rows
    seeded = Seeded()
    for i, row, kind in zip(ids, rows, kinds, strict=True):
        if kind == "old":
            target = (row["op"], row["backend"])
            (seeded.kept_forever if newest.get(target) == i else seeded.gone).add(i)
        elif kind == "middle":
            seeded.log_pruned.add(i)
        else:
            seeded.untouched.add(i)
            seeded.chunks_kept += chunks if row["log_size"] else 0
    _seed_done(db, now, seeded, done_rows, done_days, tag)
    return seeded


def _seed_done(
    db: Database, now: datetime, seeded: Seeded, count: int, days: float, tag: str
) -> None:
    old = now - timedelta(days=days + 1)
    fresh = now - timedelta(days=days / 2)
    deliveries: list[dict[str, Any]] = []
    items: list[dict[str, Any]] = []
    for n in range(count + 100):
        done = old if n < count else (fresh if n < count + 50 else None)
        deliveries.append(
            {
                "delivery_id": f"d-{tag}{n}",
                "event": "issue_comment",
                "action": "created",
                "payload": None,
                "received_at": old,
                "attempts": 1,
                "next_attempt_at": old,
                "done_at": done,
                "outcome": "no command" if done else None,
            }
        )
        items.append(
            {
                "kind": "reaction",
                "key": f"reaction:octo/kernels:{tag}{n}",
                "dedupe_key": f"r-{tag}{n}",
                "payload": {},
                "created_at": old,
                "attempts": 1,
                "next_attempt_at": old,
                "done_at": done,
                "outcome": "reacted" if done else None,
            }
        )
    notes = max(count // 20, 1)
    for pr in range(notes):  # three old versions of each pull request's note
        for version in range(3):
            items.append(
                {
                    "kind": "note",
                    "key": f"note:octo/kernels:{pr}:push{tag}",
                    "dedupe_key": f"note-{tag}{pr}-{version}",
                    "payload": {},
                    "created_at": old,
                    "attempts": 1,
                    "next_attempt_at": old,
                    "done_at": old,
                    "outcome": "note",
                }
            )
    with db.writes() as session, session.begin():
        for batch in _batches(deliveries):
            session.execute(insert(Delivery), batch)
        for batch in _batches(items):
            session.execute(insert(OutboxItem), batch)
    seeded.deliveries_gone = seeded.outbox_gone = count
    seeded.deliveries_kept = 100  # 50 recent, 50 pending
    seeded.outbox_gone += 2 * notes
    seeded.outbox_kept = 100 + notes  # and each note's newest version


def counts(db: Database) -> dict[str, int]:
    """Rows of each table retention prunes."""
    with db.reads() as session:
        return {
            model.__tablename__: int(session.scalar(select(func.count()).select_from(model)) or 0)
            for model in (Job, LogChunk, Delivery, OutboxItem)
        }
