"""The job queue on SQLite and PostgreSQL: dedupe, claim, lease, logs, complete."""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
import threading
import time
from datetime import timedelta

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy.engine import make_url

from service.db.engine import Base, make_engine, utcnow
from service.db.leases import LeasedRows
from service.db.migrate import upgrade
from service.db.models import Delivery
from service.queue import queries
from service.queue.jobs import RUNNER_LOST, JobQueue
from service.queue.wakeup import PgListener, Wakeup
from tests.service.helpers import make_queue, new_job, open_queue
from workflows.models import JobResult, JobStatus


def _result(status: JobStatus = JobStatus.succeeded) -> JobResult:
    return JobResult(status=status, sha="a" * 40)


def test_migrations_match_models_and_rerun(empty_db_url: str) -> None:
    engine = make_engine(empty_db_url)
    upgrade(engine)
    upgrade(engine)  # a second run is a no-op
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), Base.metadata)
    engine.dispose()
    assert diff == []


def test_create_dedupes_active_jobs_only(db_url: str) -> None:
    with open_queue(db_url) as store:
        job, created = store.jobs.create_job(new_job())
        again, created_again = store.jobs.create_job(new_job())
        assert created and not created_again and again.id == job.id
        other_sha, created = store.jobs.create_job(new_job(sha="b" * 40))
        assert created and other_sha.id != job.id
        runner_id, _ = store.runners.register("r1", ["cpu"])
        claimed = store.jobs.claim(runner_id, ["cpu"])
        assert claimed is not None and claimed.id == job.id
        # running still dedupes
        assert store.jobs.create_job(new_job())[1] is False
        store.jobs.complete(runner_id, job.id, _result())
        fresh, created = store.jobs.create_job(new_job())
        assert created and fresh.id not in (job.id, other_sha.id)


def test_claim_takes_oldest_of_own_backends(db_url: str) -> None:
    with open_queue(db_url, lease_seconds=30) as store:
        runner_id, _ = store.runners.register("r1", ["cpu", "nvidia"])
        a = store.jobs.create_job(new_job("a", "mthreads"))[0]
        b = store.jobs.create_job(new_job("b", "nvidia"))[0]
        c = store.jobs.create_job(new_job("c", "cpu"))[0]
        assert store.jobs.claim(runner_id, []) is None
        first = store.jobs.claim(runner_id, ["cpu", "nvidia"])
        second = store.jobs.claim(runner_id, ["cpu", "nvidia"])
        assert first is not None and second is not None
        assert [first.id, second.id] == [b.id, c.id]
        assert first.status == JobStatus.running and first.runner_id == runner_id
        assert first.lease_expires_at is not None
        # until the runner's first heartbeat acknowledges it, a claim has a short lease
        assert first.lease_expires_at - first.started_at == timedelta(seconds=10)
        assert store.jobs.heartbeat(runner_id, first.id) is not None
        renewed = store.jobs.get_job(first.id)
        assert renewed.lease_expires_at - renewed.acked_at == timedelta(seconds=30)
        assert store.jobs.claim(runner_id, ["cpu", "nvidia"]) is None
        assert store.jobs.get_job(a.id).status == JobStatus.queued


def test_concurrent_claims_take_each_job_exactly_once(db_url: str) -> None:
    with open_queue(db_url) as store:
        jobs = [store.jobs.create_job(new_job(f"op{i}"))[0].id for i in range(40)]
        runners = [store.runners.register(f"r{i}", ["cpu"])[0] for i in range(8)]
        claimed: list[tuple[int, int]] = []
        lock = threading.Lock()
        barrier = threading.Barrier(len(runners))

        def work(runner_id: int) -> None:
            barrier.wait()
            while (job := store.jobs.claim(runner_id, ["cpu"])) is not None:
                with lock:
                    claimed.append((job.id, runner_id))

        threads = [threading.Thread(target=work, args=(r,)) for r in runners]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        ids = [job_id for job_id, _ in claimed]
        assert sorted(ids) == sorted(jobs)  # all claimed, none twice
        for job_id, runner_id in claimed:
            assert store.jobs.get_job(job_id).runner_id == runner_id


def test_runner_cannot_touch_another_runners_job(db_url: str) -> None:
    with open_queue(db_url) as store:
        mine, _ = store.runners.register("mine", ["cpu"])
        theirs, _ = store.runners.register("theirs", ["cpu"])
        job = store.jobs.create_job(new_job())[0]
        assert store.jobs.claim(mine, ["cpu"]) is not None
        assert store.jobs.heartbeat(theirs, job.id) is None
        assert store.logs.append(theirs, job.id, 0, b"x") is None
        assert store.jobs.complete(theirs, job.id, _result()) is None
        assert store.jobs.get_job(job.id).status == JobStatus.running


def test_heartbeat_renews_lease_and_carries_cancel(db_url: str) -> None:
    with open_queue(db_url, lease_seconds=60) as store:
        runner_id, _ = store.runners.register("r", ["cpu"])
        job = store.jobs.create_job(new_job())[0]
        claimed = store.jobs.claim(runner_id, ["cpu"])
        assert claimed is not None
        beat = store.jobs.heartbeat(runner_id, job.id)
        assert beat is not None and not beat.cancel
        assert beat.lease_expires_at >= claimed.lease_expires_at
        affected = store.jobs.cancel("octo/kernels", 1, "cancelled by @maint")
        assert [j.id for j in affected] == [job.id]
        beat = store.jobs.heartbeat(runner_id, job.id)
        assert beat is not None and beat.cancel and beat.reason == "cancelled by @maint"
        assert store.jobs.complete(runner_id, job.id, _result(JobStatus.cancelled)) == "cancelled"
        assert store.jobs.get_job(job.id).reason == "cancelled by @maint"


def test_lapsed_lease_requeues_once_then_runner_lost(db_url: str) -> None:
    with open_queue(db_url, lease_seconds=5) as store:
        r1, _ = store.runners.register("r1", ["cpu"])
        r2, _ = store.runners.register("r2", ["cpu"])
        job = store.jobs.create_job(new_job())[0]
        assert store.jobs.claim(r1, ["cpu"]) is not None
        assert store.jobs.heartbeat(r1, job.id) is not None  # r1 started it
        assert store.jobs.reap(utcnow()) == []  # not yet
        later = utcnow() + timedelta(seconds=6)
        assert [j.id for j in store.jobs.reap(later)] == [job.id]
        requeued = store.jobs.get_job(job.id)
        assert requeued.status == JobStatus.queued and requeued.attempt == 2
        assert requeued.runner_id is None and "r1 lost" in (requeued.reason or "")
        # the lost runner can no longer touch it
        assert store.jobs.heartbeat(r1, job.id) is None
        again = store.jobs.claim(r2, ["cpu"])
        assert again is not None and again.id == job.id and again.attempt == 2
        assert store.jobs.heartbeat(r2, job.id) is not None
        store.jobs.reap(utcnow() + timedelta(seconds=6))
        lost = store.jobs.get_job(job.id)
        assert lost.status == JobStatus.errored and lost.reason == RUNNER_LOST
        assert lost.finished_at is not None


def test_a_runner_that_stops_its_job_hands_it_back_once(db_url: str) -> None:
    """A runner told to stop (two SIGTERMs) interrupts its job: requeued for attempt 2 on any
    runner, errored after the last attempt; a job someone cancelled stays cancelled."""
    with open_queue(db_url, lease_seconds=5) as store:
        r1, _ = store.runners.register("r1", ["cpu"])
        r2, _ = store.runners.register("r2", ["cpu"])
        job = store.jobs.create_job(new_job())[0]
        assert store.jobs.claim(r1, ["cpu"]) is not None
        assert store.jobs.heartbeat(r1, job.id) is not None
        assert store.jobs.interrupt(r2, job.id, "stopped (SIGTERM)") is None  # not r2's
        assert store.jobs.interrupt(r1, job.id, "stopped (SIGTERM)") == JobStatus.queued
        requeued = store.jobs.get_job(job.id)
        assert requeued.attempt == 2 and requeued.runner_id is None
        assert requeued.reason == "r1 stopped (SIGTERM); requeued"
        assert store.jobs.heartbeat(r1, job.id) is None  # r1 holds it no more
        assert store.jobs.claim(r2, ["cpu"]).attempt == 2
        assert store.jobs.heartbeat(r2, job.id) is not None
        assert store.jobs.interrupt(r2, job.id, "stopped (SIGINT)") == JobStatus.errored
        last = store.jobs.get_job(job.id)
        assert last.reason == "r2 stopped (SIGINT) on its last attempt" and last.finished_at
        # A maintainer's cancel that arrived first is what the job ends as.
        other = store.jobs.create_job(new_job(pr=2))[0]
        assert store.jobs.claim(r1, ["cpu"]).id == other.id
        store.jobs.heartbeat(r1, other.id)
        store.jobs.cancel(other.repo, other.pr_number, "cancelled by @maint")
        assert store.jobs.interrupt(r1, other.id, "stopped (SIGTERM)") == JobStatus.cancelled
        assert store.jobs.get_job(other.id).reason == "cancelled by @maint"


def test_a_claim_no_runner_acknowledged_is_no_attempt(db_url: str) -> None:
    """A runner that died waiting for its claim's answer never heartbeats: the job goes back
    as it was, its attempt unspent; a stopping runner gives an unstarted claim back at once."""
    with open_queue(db_url, lease_seconds=60) as store:
        ghost, _ = store.runners.register("ghost", ["cpu"])
        live, _ = store.runners.register("live", ["cpu"])
        job = store.jobs.create_job(new_job())[0]
        claimed = store.jobs.claim(ghost, ["cpu"])
        assert claimed is not None and claimed.acked_at is None
        # the first lease of a claim is short: the acknowledgement window
        assert claimed.lease_expires_at <= utcnow() + timedelta(seconds=11)
        store.jobs.reap(utcnow() + timedelta(seconds=11))
        back = store.jobs.get_job(job.id)
        assert back.status == JobStatus.queued and back.attempt == 1
        assert "never started" in (back.reason or "")
        assert store.jobs.claim(live, ["cpu"]) is not None
        assert store.jobs.release(live, job.id)  # given back before starting it
        assert store.jobs.get_job(job.id).attempt == 1
        assert store.jobs.claim(live, ["cpu"]) is not None
        assert store.jobs.heartbeat(live, job.id) is not None
        assert not store.jobs.release(live, job.id)  # started: not to be given back


def test_logs_by_offset(db_url: str) -> None:
    with open_queue(db_url) as store:
        runner_id, _ = store.runners.register("r", ["cpu"])
        job = store.jobs.create_job(new_job())[0]
        store.jobs.claim(runner_id, ["cpu"])
        first = "héllo ".encode()
        assert store.logs.append(runner_id, job.id, 0, first).offset == len(first)
        dup = store.logs.append(runner_id, job.id, 0, first)
        assert dup.accepted and dup.offset == len(first)  # duplicate: no-op
        gap = store.logs.append(runner_id, job.id, len(first) + 5, b"x")
        assert not gap.accepted and gap.offset == len(first)
        clash = store.logs.append(runner_id, job.id, 1, b"XXXXXXXX")
        assert not clash.accepted and clash.offset == len(first)
        # an overlap that agrees appends only the new part
        ok = store.logs.append(runner_id, job.id, len(first) - 1, b" world")
        assert ok.accepted and ok.offset == len(first) + 5
        assert store.logs.read(job.id) == "héllo world".encode()
        assert store.logs.read(job.id, 7, 3) == b"wor"


def test_complete_is_idempotent_and_validated(db_url: str) -> None:
    with open_queue(db_url) as store:
        runner_id, _ = store.runners.register("r", ["cpu"])
        job = store.jobs.create_job(new_job())[0]
        store.jobs.claim(runner_id, ["cpu"])
        with pytest.raises(ValueError, match="not running"):
            store.jobs.complete(runner_id, job.id, _result(JobStatus.running))
        assert store.jobs.complete(runner_id, job.id, _result(JobStatus.failed)) == "failed"
        done = store.jobs.get_job(job.id)
        assert store.jobs.complete(runner_id, job.id, _result(JobStatus.succeeded)) == "failed"
        after = store.jobs.get_job(job.id)
        assert after.finished_at == done.finished_at and after.result == done.result


def test_supersede_and_cancel_select_jobs(db_url: str) -> None:
    with open_queue(db_url) as store:
        runner_id, _ = store.runners.register("r", ["nvidia"])
        old_running = store.jobs.create_job(new_job("a", "nvidia"))[0]
        store.jobs.claim(runner_id, ["nvidia"])
        old_queued = store.jobs.create_job(new_job("b", "cpu"))[0]
        new_queued = store.jobs.create_job(new_job("c", "cpu", sha="f" * 40))[0]
        affected = store.jobs.supersede("octo/kernels", 1, "f" * 40)
        assert sorted(j.id for j in affected) == [old_running.id, old_queued.id]
        assert store.jobs.get_job(old_queued.id).status == JobStatus.superseded
        assert store.jobs.get_job(old_queued.id).reason == "superseded by fffffff"
        running = store.jobs.get_job(old_running.id)
        assert running.status == JobStatus.running and running.cancel_requested
        assert store.jobs.get_job(new_queued.id).status == JobStatus.queued
        cancelled = store.jobs.cancel("octo/kernels", 1, "closed", match=lambda j: j.op == "c")
        assert [j.id for j in cancelled] == [new_queued.id]
        assert store.jobs.get_job(new_queued.id).status == JobStatus.cancelled


def test_queue_position_and_runners_online(db_url: str) -> None:
    with open_queue(db_url) as store:
        jobs = [store.jobs.create_job(new_job(f"op{i}", "cpu"))[0] for i in range(3)]
        store.jobs.create_job(new_job("x", "nvidia"))
        with store.db.reads() as session:
            positions = [queries.queue_position(session, j) for j in jobs]
        assert positions == [1, 2, 3]
        assert store.runners.online_count("cpu") == 0
        healthy, _ = store.runners.register("ok", ["cpu"])
        sick, _ = store.runners.register("sick", ["cpu"])
        store.runners.set_health(sick, False, "no MUSA device", None)
        assert store.runners.online_count("cpu") == 1
        assert store.runners.unhealthy_reasons("cpu") == ["sick: no MUSA device"]
        store.jobs.claim(healthy, ["cpu"])
        with store.db.reads() as session:
            assert queries.queue_position(session, store.jobs.get_job(jobs[1].id)) == 1


def test_waiting_claim_is_woken_by_enqueue(db_url: str) -> None:
    with open_queue(db_url) as store:
        runner_id, _ = store.runners.register("r", ["cpu"])
        got: list[float] = []

        def wait_then_claim() -> None:
            since = store.wakeup.snapshot(["cpu"])
            assert store.jobs.claim(runner_id, ["cpu"]) is None
            asyncio.run(store.wakeup.wait(["cpu"], since, 10))
            assert store.jobs.claim(runner_id, ["cpu"]) is not None
            got.append(time.monotonic())

        thread = threading.Thread(target=wait_then_claim)
        thread.start()
        time.sleep(0.3)
        start = time.monotonic()
        store.jobs.create_job(new_job())
        thread.join(timeout=10)
        assert got and got[0] - start < 3  # woken, not timed out (10 s): far under either


@pytest.mark.postgres
def test_pg_notify_wakes_another_replica(pg_url: str) -> None:
    conninfo = make_url(pg_url).set(drivername="postgresql").render_as_string(False)
    with open_queue(pg_url) as producer:
        replica_wakeup = Wakeup()
        listener = PgListener(conninfo, replica_wakeup)
        listener.start()
        try:
            assert listener.listening.wait(10)
            time.sleep(0.1)  # let the reconnect wake-all settle
            since = replica_wakeup.snapshot(["cpu"])
            start = time.monotonic()
            producer.jobs.create_job(new_job())
            assert asyncio.run(replica_wakeup.wait(["cpu"], since, 5))
            assert time.monotonic() - start < 3  # woken, not timed out (5 s)
        finally:
            listener.stop()


def test_store_types(db_url: str) -> None:
    with open_queue(db_url) as store:
        assert isinstance(store.jobs, JobQueue)
        job = store.jobs.create_job(new_job())[0]
        fetched = store.jobs.get_job(job.id)
        assert fetched.created_at.tzinfo is not None


def _claim_all(url: str, runner_id: int, start: float) -> list[int]:
    """In a separate process: claim until the queue is empty."""
    queue = make_queue(url)
    time.sleep(max(0.0, start - time.time()))  # start together
    ids: list[int] = []
    while (job := queue.jobs.claim(runner_id, ["cpu"])) is not None:
        ids.append(job.id)
    queue.db.dispose()
    return ids


def test_concurrent_claims_across_processes(db_url: str) -> None:
    with open_queue(db_url) as store:
        jobs = [store.jobs.create_job(new_job(f"op{i}"))[0].id for i in range(30)]
        runners = [store.runners.register(f"p{i}", ["cpu"])[0] for i in range(4)]
    start = time.time() + 0.5
    ctx = multiprocessing.get_context("fork")  # fresh engines are made in the children
    with ctx.Pool(len(runners)) as pool:
        results = pool.starmap(_claim_all, [(db_url, r, start) for r in runners])
    claimed = [job_id for ids in results for job_id in ids]
    assert sorted(claimed) == sorted(jobs)


def test_a_command_processed_again_creates_only_what_it_had_not(db_url: str) -> None:
    """After a crash mid fan-out the command runs again: its finished job is not created a
    second time, and only the targets it had not reached get jobs."""
    with open_queue(db_url) as store:
        by_comment = dataclasses.replace(new_job("a"), command_comment_id=555)
        first, created = store.jobs.create_job(by_comment)
        runner_id, _ = store.runners.register("r1", ["cpu"])
        assert store.jobs.claim(runner_id, ["cpu"]) is not None
        store.jobs.complete(runner_id, first.id, _result())  # finished before the crash
        again, created_again = store.jobs.create_job(by_comment)
        assert created and not created_again and again.id == first.id
        rest, created_rest = store.jobs.create_job(dataclasses.replace(by_comment, op="b"))
        assert created_rest and rest.id != first.id
        # another comment asking for the same finished target does get a new job
        other = dataclasses.replace(by_comment, command_comment_id=556)
        assert store.jobs.create_job(other)[1] is True


def test_a_taken_row_stays_locked_while_held_and_comes_back_soon_after_a_crash(
    db_url: str,
) -> None:
    """A try that outlasts the lock keeps it (renewed), so no second worker takes the row; a
    worker that dies (takes and never finishes) loses it within one short lock."""
    with open_queue(db_url) as store:
        with store.db.writes() as session, session.begin():
            row = Delivery(delivery_id="d-1", event="issue_comment", payload={})
            session.add(row)
        rows = LeasedRows(store.db, Delivery, lock_s=0.6)
        assert rows.take(row.id) is not None
        with rows.held(row.id):
            time.sleep(1.5)  # two and a half locks
            assert rows.take(row.id) is None  # still ours
        rows.retry(row.id, 0, "GitHub was slow")
        assert rows.take(row.id) is not None  # the crash: taken, never finished or renewed
        assert rows.take(row.id) is None
        time.sleep(0.7)
        again = rows.take(row.id)
        assert again is not None and again.attempts == 3
