"""Retention on SQLite and PostgreSQL: what is old (a plain function), 10,000 old jobs pruned to
the settings with what must stay intact, every transaction bounded, two replicas pruning at
once, the pages of a pruned log and a pruned job, the indexes the queries use, and the
database's size staying bounded."""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError
from sqlalchemy import Engine, Select, event, func, select, update

from service.db.engine import Database
from service.db.migrate import upgrade
from service.db.models import Delivery, Job, LogChunk, OutboxItem
from service.queue.retention import (
    Cutoffs,
    Pruned,
    Pruner,
    Retention,
    cutoffs,
    done_due,
    emptied,
    jobs_due,
    logs_due,
)
from service.settings import Settings
from tests.service.helpers import live_service, new_job, service_settings
from tests.service.seeding import counts, seed
from workflows.models import JobResult

NOW = datetime(2027, 6, 1, 12, 0, tzinfo=UTC)


@contextmanager
def migrated(url: str) -> Iterator[Database]:
    db = Database.connect(url)
    upgrade(db.engine)
    try:
        yield db
    finally:
        db.dispose()


def pruner(db: Database, batch: int = 500, **days: float) -> Pruner:
    return Pruner(db, Retention(**days), threading.Event(), batch=batch)


# -- what is old -----------------------------------------------------------------------------


def test_cutoffs_keep_forever_at_zero_and_a_log_never_outlives_its_job() -> None:
    days = timedelta(days=1)
    assert cutoffs(Retention(90, 30, 14), NOW) == Cutoffs(
        jobs=NOW - 90 * days, logs=NOW - 30 * days, done=NOW - 14 * days
    )
    forever = cutoffs(Retention(0, 0, 0), NOW)
    assert (forever.jobs, forever.logs, forever.done) == (None, None, None)
    # logs kept "as long as their jobs": they go with them
    assert cutoffs(Retention(90, 0, 14), NOW).logs == NOW - 90 * days
    # jobs kept forever, logs pruned
    assert cutoffs(Retention(0, 30, 14), NOW).logs == NOW - 30 * days


def test_a_batch_empties_the_logs_before_the_last_job_it_deleted_from() -> None:
    assert emptied([7, 3, 5], [3, 5], full=False) == [3, 5, 7]  # read them all
    assert emptied([7, 3, 5], [3, 5], full=True) == [3]  # 5's log may go on
    assert emptied([7, 3, 5], [3], full=True) == []
    assert emptied([4, 9], [], full=False) == [4, 9]  # a log_size without chunks


def test_the_settings_are_validated() -> None:
    base = service_settings("sqlite:///unused.db")
    assert (base.retention_days, base.log_retention_days, base.delivery_retention_days) == (
        90,
        30,
        14,
    )
    service_settings("sqlite:///unused.db", retention_days=0, log_retention_days=0)
    service_settings("sqlite:///unused.db", retention_days=0, log_retention_days=400)
    bad = [
        ({"retention_days": 0.5}, "ONDEMAND_RETENTION_DAYS is 0.5: 0 .* or at least 1"),
        ({"log_retention_days": 0.1}, "ONDEMAND_LOG_RETENTION_DAYS is 0.1"),
        ({"delivery_retention_days": 3}, "ONDEMAND_DELIVERY_RETENTION_DAYS is 3: .* at least 7"),
        ({"retention_days": 10, "log_retention_days": 30}, "a log goes with its job"),
        ({"retention_days": -1}, "greater than or equal to 0"),
    ]
    for values, message in bad:
        with pytest.raises(ValidationError, match=message):
            Settings(database_url="sqlite:///unused.db", **values)  # type: ignore[arg-type]


# -- the bar ---------------------------------------------------------------------------------


def test_ten_thousand_old_jobs_are_pruned_to_the_settings(
    db_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with migrated(db_url) as db:
        seeded = seed(db, NOW, old=10_000)
        before = counts(db)
        assert before["jobs"] == 10_000 + 300 + 300 + 40
        started = time.monotonic()
        with caplog.at_level(logging.INFO, logger="service.queue.retention"):
            done = pruner(db).prune(NOW)
        took = time.monotonic() - started
        assert done.jobs == len(seeded.gone) and len(seeded.gone) == 10_000 - 25
        assert done.logs == 10_000 + 300  # every old and middle job's log
        assert done.chunks == before["log_chunks"] - seeded.chunks_kept
        assert (done.deliveries, done.outbox) == (seeded.deliveries_gone, seeded.outbox_gone)
        assert took < 60, f"pruning took {took:.1f} s"

        with db.reads() as session:
            left = {i: (size, pruned) for i, size, pruned in session.execute(
                select(Job.id, Job.log_size, Job.log_pruned_at))}  # fmt: skip
            logged = set(session.scalars(select(LogChunk.job_id).distinct()))
        assert set(left) == seeded.jobs_kept
        for job_id in seeded.kept_forever | seeded.log_pruned:
            assert left[job_id][0] == 0 and left[job_id][1] is not None
        assert logged == {i for i in seeded.untouched if left[i][0] > 0}
        assert all(left[i][1] is None for i in seeded.untouched)
        after = counts(db)
        assert after == {
            "jobs": len(seeded.jobs_kept),
            "log_chunks": seeded.chunks_kept,
            "deliveries": seeded.deliveries_kept,
            "outbox": seeded.outbox_kept,
        }
        with db.reads() as session:  # nothing pending went, and each note's newest stayed
            assert (
                session.scalar(select(func.count()).where(Delivery.done_at.is_(None))) == 50
                and session.scalar(select(func.count()).where(OutboxItem.done_at.is_(None))) == 50
            )
            newest = session.execute(
                select(OutboxItem.key, func.count()).where(OutboxItem.kind == "note")
                .group_by(OutboxItem.key)
            ).all()  # fmt: skip
        assert newest and all(n == 1 for _, n in newest)

        lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("pruned")]
        assert len(lines) == 1 and lines[0].startswith(
            f"pruned {done.jobs} jobs, {done.logs} logs ({done.chunks} chunks), "
            f"{done.deliveries} deliveries, {done.outbox} outbox items in "
        )
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="service.queue.retention"):
            assert pruner(db).prune(NOW) == Pruned()  # nothing left to do, nothing logged
        assert not caplog.records
        assert counts(db) == after


# -- bounded, and safe on several replicas ----------------------------------------------------


@contextmanager
def transactions(engine: Engine) -> Iterator[list[Counter[str]]]:
    """The rows each committed transaction on `engine` deleted or updated, by statement and
    table (`DELETE log_chunks`: 500)."""
    done: list[Counter[str]] = []
    open_: dict[int, Counter[str]] = {}

    def executed(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        found = re.match(r"\s*(DELETE FROM|UPDATE)\s+(\w+)", statement)
        if found:
            key = f"{found[1].split()[0]} {found[2]}"
            open_.setdefault(id(conn), Counter())[key] += max(cursor.rowcount, 0)

    def committed(conn: Any) -> None:
        done.append(open_.pop(id(conn), Counter()))

    event.listen(engine, "after_cursor_execute", executed)
    event.listen(engine, "commit", committed)
    try:
        yield done
    finally:
        event.remove(engine, "after_cursor_execute", executed)
        event.remove(engine, "commit", committed)


def test_a_pass_deletes_a_bounded_batch_per_transaction(db_url: str) -> None:
    with migrated(db_url) as db:
        seeded = seed(db, NOW, old=1_200, middle=60, recent=60, active=10, targets=10,
                      chunks=4, done_rows=450)  # fmt: skip
        with transactions(db.engine) as txs:
            done = pruner(db, batch=100).prune(NOW)
        assert done.jobs == len(seeded.gone) and done.chunks == 4 * (1_200 + 60)
        writing = [tx for tx in txs if tx]
        assert max(n for tx in writing for n in tx.values()) == 100  # full batches, no more
        totals: Counter[str] = Counter()
        for tx in writing:
            totals.update(tx)
        assert totals["DELETE log_chunks"] == done.chunks
        assert totals["DELETE jobs"] == done.jobs
        assert totals["DELETE deliveries"] == done.deliveries == 450
        assert totals["DELETE outbox"] == done.outbox
        # every batch its own transaction: at least total / batch of them
        for key in ("DELETE log_chunks", "DELETE jobs", "DELETE deliveries", "DELETE outbox"):
            assert sum(1 for tx in writing if tx[key]) >= -(-totals[key] // 100), key


def test_replicas_pruning_at_once_delete_each_row_once(db_url: str) -> None:
    with migrated(db_url) as db:
        seeded = seed(db, NOW, old=3_000, done_rows=1_000, chunks=3)
        expected_chunks = counts(db)["log_chunks"] - seeded.chunks_kept
    replicas = [Database.connect(db_url) for _ in range(2)]
    results: list[Pruned] = []
    errors: list[BaseException] = []
    gate = threading.Barrier(2)

    def prune(db: Database) -> None:
        try:
            gate.wait()
            results.append(pruner(db, batch=200).prune(NOW))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=prune, args=(db,)) for db in replicas]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    for db in replicas:
        db.dispose()
    assert not errors and len(results) == 2
    total = Pruned()
    for result in results:
        total.add(result)
    assert total.jobs == len(seeded.gone) and total.chunks == expected_chunks
    assert total.logs == 3_000 + 300
    assert (total.deliveries, total.outbox) == (seeded.deliveries_gone, seeded.outbox_gone)
    with migrated(db_url) as db:
        with db.reads() as session:
            assert set(session.scalars(select(Job.id))) == seeded.jobs_kept
        assert counts(db)["log_chunks"] == seeded.chunks_kept


# -- the pages --------------------------------------------------------------------------------


def test_a_pruned_log_and_a_pruned_job_say_so_on_their_pages(db_url: str) -> None:
    with live_service(service_settings(db_url)) as live:
        svc = live.service
        runner_id, _ = live.register()

        def run(text: str) -> int:
            job, _ = svc.jobs.create_job(new_job())
            assert svc.jobs.claim(runner_id, ["cpu"]) is not None
            assert svc.logs.append(runner_id, job.id, 0, text.encode()).accepted
            assert svc.jobs.complete(runner_id, job.id, JobResult(status="succeeded", sha="a" * 40))
            return job.id

        def finished_days_ago(job_id: int, days: float) -> None:
            with svc.db.writes() as session, session.begin():
                session.execute(
                    update(Job).where(Job.id == job_id)
                    .values(finished_at=datetime.now(UTC) - timedelta(days=days))
                )  # fmt: skip

        first = run("the first run's log\n")
        finished_days_ago(first, 40)
        assert svc.pruner.prune().logs == 1
        log = httpx.get(f"{live.url}/jobs/{first}/log")
        assert log.status_code == 410
        assert log.text.startswith("This log was pruned 40 days after the job finished (")
        assert "the job, its result and its report stay" in log.text
        page = httpx.get(f"{live.url}/jobs/{first}")
        assert page.status_code == 200
        assert "(pruned)" in page.text and "This log was pruned 40 days after" in page.text
        assert "the first run" not in page.text
        live_state = httpx.get(f"{live.url}/jobs/{first}/live").json()
        assert live_state["log_pruned"] and live_state["log"].startswith("This log was pruned")

        # the only run of its target stays (the dashboard's last point), a newer one lets it go
        finished_days_ago(first, 100)
        assert svc.pruner.prune().jobs == 0
        second = run("the second run's log\n")
        assert svc.pruner.prune().jobs == 1
        gone = httpx.get(f"{live.url}/jobs/{first}")
        assert gone.status_code == 404 and gone.headers["content-type"].startswith("text/html")
        assert (
            f"There is no job #{first} here. Finished jobs are kept for 90 days, so it may have "
            "been pruned." in gone.text
        )
        for path in ("log", "live", "result.json"):
            answer = httpx.get(f"{live.url}/jobs/{first}/{path}")
            assert answer.status_code == 404 and "may have been pruned" in answer.json()["detail"]
        assert httpx.get(f"{live.url}/jobs/{second}/log").text == "the second run's log\n"
        metrics = httpx.get(f"{live.url}/metrics").text
        assert 'ondemand_pruned_rows_total{kind="jobs"} 1.0' in metrics
        assert 'ondemand_pruned_rows_total{kind="logs"} 1.0' in metrics


# -- indexes and size -------------------------------------------------------------------------


def _plan(db: Database, query: Select[Any]) -> str:
    compiled = query.compile(dialect=db.engine.dialect, compile_kwargs={"render_postcompile": True})
    params = compiled.construct_params()
    with db.engine.connect() as conn:
        if db.postgres:
            conn.exec_driver_sql("SET enable_seqscan = off")  # can an index serve it at all?
            rows = conn.exec_driver_sql(f"EXPLAIN {compiled}", params).all()
        else:
            args = tuple(params[name] for name in compiled.positiontup or ())
            rows = conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}", args).all()
    return "\n".join(str(row[-1]) for row in rows)


def test_the_pruning_queries_have_indexes(db_url: str) -> None:
    with migrated(db_url) as db:
        assert "ix_jobs_logged" in _plan(db, logs_due(NOW))
        assert "ix_jobs_finished" in _plan(db, jobs_due(NOW))
        assert "ix_jobs_target" in _plan(db, jobs_due(NOW))
        assert "ix_deliveries_done_at" in _plan(db, done_due(Delivery, NOW))
        assert "ix_outbox_pending" in _plan(db, done_due(OutboxItem, NOW))


def _sqlite_bytes(path: Path) -> int:
    """The database file and its WAL after a checkpoint that empties the WAL."""
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = path.with_name(path.name + "-wal")
    return path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


# 600 old jobs with 16 KiB of log each: about 10 MiB
SIZED = {"old": 600, "middle": 0, "recent": 0, "active": 0, "targets": 10, "chunks": 4,
         "chunk_bytes": 4096, "done_rows": 0}  # fmt: skip


def test_sqlite_reuses_the_pages_pruning_frees(tmp_path: Path) -> None:
    path = tmp_path / "ondemand.db"
    with migrated(f"sqlite:///{path}") as db:
        seed(db, NOW, tag="a", **SIZED)
        full = _sqlite_bytes(path)
        pruner(db).prune(NOW + timedelta(days=1000))
        assert _sqlite_bytes(path) == full  # the file keeps its pages, free for reuse
        seed(db, NOW, tag="b", **SIZED)
        assert _sqlite_bytes(path) < full * 1.05  # and the next inserts reuse them


def test_sqlite_made_incremental_gives_freed_pages_back(tmp_path: Path) -> None:
    path = tmp_path / "ondemand.db"
    with migrated(f"sqlite:///{path}"):
        pass
    with sqlite3.connect(path) as conn:  # what docs/operations.md tells an operator to run
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("VACUUM")
    with migrated(f"sqlite:///{path}") as db:
        seed(db, NOW, **SIZED)
        full = _sqlite_bytes(path)
        done = pruner(db).prune(NOW + timedelta(days=1000))
        assert done.vacuumed_pages > 2000
        assert _sqlite_bytes(path) < full * 0.2
