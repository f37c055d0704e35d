"""A default branch's history written straight into the store through the models, for the
trend pages' tests: five pushes (c2…c6, each compared with the commit before), a row that
turns slower at c4 (marked, and listed in an open regression issue), a row whose drift is
marked at c6, a host-time row measured once, and two pull requests' own runs (one compared
with c3, one with no base known, made after c6)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from service.db.engine import Database
from service.db.models import HistoryPoint, Job, MainRun, RegressionIssue
from workflows.models import BenchmarkResult, BenchmarkRow, JobResult, JobStatus

OP, BACKEND = "add", "cpu"
COMMITS = [c * 40 for c in "123456"]  # c1 … c6; c1 is only ever a base
PULL_SHAS = ("e" * 40, "f" * 40)
BIG, SMALL = "1024×1024", "4096"
T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)

# each row's (time, ratio, interval half-width or None for too few rounds, mark) at c2…c6
BIG_DEVICE = [
    (1.00, 1.000, 0.02, None),
    (1.01, 1.010, None, None),
    (1.22, 1.208, 0.02, "slower"),
    (1.23, 1.008, 0.02, None),
    (1.24, 1.008, 0.02, None),
]
SMALL_DEVICE = [
    (2.00, 1.00, 0.01, None),
    (2.02, 1.01, 0.01, None),
    (2.04, 1.01, 0.01, None),
    (2.10, 1.03, 0.01, None),
    (2.20, 1.05, 0.01, "drift"),
]


@dataclass
class Seeded:
    repo: str
    main_jobs: dict[str, int] = field(default_factory=dict)  # commit → its push's job
    points: dict[tuple[str, str, str], int] = field(default_factory=dict)  # shape, metric, sha
    pull_jobs: list[int] = field(default_factory=list)
    queued_job: int = 0  # a pull request's job still queued
    issue_number: int = 77


def _point(repo: str, shape: str, metric: str, at: int, job_id: int, made: tuple) -> HistoryPoint:
    value, ratio, half, mark = made
    low = None if half is None else ratio * (1 - half)
    high = None if half is None else ratio * (1 + half)
    verdict = {"slower": "slower", "drift": "same"}.get(mark or "", "same")
    return HistoryPoint(
        repo=repo, op=OP, backend=BACKEND, dtype="float32", shape=shape, metric=metric,
        sha=COMMITS[at], base_sha=COMMITS[at - 1], job_id=job_id, rounds=8 if half else 3,
        ratio=ratio, low=low, high=high, value=value, threshold=0.1, verdict=verdict,
        mark=mark, created_at=T0 + timedelta(minutes=at),
    )  # fmt: skip


def _pull_result(sha: str, base: str | None, big_ms: float, small_ms: float) -> dict:
    rows = [
        BenchmarkRow(
            dtype="float32",
            size=[1024, 1024],
            reference_ms=1.0,
            kernel_ms=big_ms,
            speedup=1 / big_ms,
        ),
        BenchmarkRow(
            dtype="float32",
            size=[4096],
            reference_ms=2.0,
            kernel_ms=small_ms,
            speedup=2 / small_ms,
            kernel_host_us=30.0,
        ),
    ]
    bench = BenchmarkResult(op=OP, rows=rows, performance=True, merge_base=base)
    done = JobResult(status=JobStatus.succeeded, sha=sha, benchmark=bench)
    return done.model_dump(mode="json")


def _job(repo: str, private: bool, status: str = "succeeded", **values: object) -> Job:
    return Job(repo=repo, clone_url="/tmp/none.git", op=OP, backend=BACKEND, private=private,
               status=status, threshold=0.1, **values)  # fmt: skip


def seed_history(db: Database, repo: str = "octo/kernels", private: bool = False) -> Seeded:
    """The history above for `repo` (its jobs and runs private where `private`)."""
    seeded = Seeded(repo)
    with db.writes() as session, session.begin():
        for at in range(1, len(COMMITS)):
            sha = COMMITS[at]
            run = MainRun(
                repo=repo,
                key=f"push:{sha}",
                trigger="push",
                sha=sha,
                before_sha=COMMITS[at - 1],
                pull_number=10 + at,
                clone_url="/tmp/none.git",
                private=private,
                default_branch="main",
                alerts=["issue"],
                drift_window=8,
                created_at=T0 + timedelta(minutes=at),
            )
            session.add(run)
            session.flush()
            job = _job(repo, private, pr_number=0, sha=sha, base_sha=COMMITS[at - 1],
                       trigger="push", main_run_id=run.id,
                       created_at=T0 + timedelta(minutes=at))  # fmt: skip
            session.add(job)
            session.flush()
            seeded.main_jobs[sha] = job.id
            made = [(BIG, "device", BIG_DEVICE[at - 1]), (SMALL, "device", SMALL_DEVICE[at - 1])]
            if at == len(COMMITS) - 1:
                made.append((SMALL, "host", (35.5, 1.02, 0.03, None)))
            for shape, metric, values in made:
                point = _point(repo, shape, metric, at, job.id, values)
                session.add(point)
                session.flush()
                seeded.points[(shape, metric, sha)] = point.id
        for number, sha, base, big, small, minute in (
            (21, PULL_SHAS[0], COMMITS[2], 1.05, 2.5, 30),
            (22, PULL_SHAS[1], None, 1.30, 2.3, 40),
        ):
            job = _job(repo, private, pr_number=number, sha=sha, base_sha=None,
                       result=_pull_result(sha, base, big, small),
                       created_at=T0 + timedelta(minutes=minute))  # fmt: skip
            session.add(job)
            session.flush()
            seeded.pull_jobs.append(job.id)
        queued = _job(repo, private, pr_number=23, sha="d" * 40, status="queued")
        session.add(queued)
        session.flush()
        seeded.queued_job = queued.id
        start = seeded.points[(BIG, "device", COMMITS[3])]
        session.add(
            RegressionIssue(
                repo=repo,
                op=OP,
                backend=BACKEND,
                state="open",
                issue_number=77,
                opened_job_id=seeded.main_jobs[COMMITS[3]],
                created_at=T0,
                rows=[
                    {
                        "dtype": "float32",
                        "shape": BIG,
                        "metric": "device",
                        "kind": "slower",
                        "start_id": start,
                        "found_at": COMMITS[3],
                        "recovered_at": None,
                    }
                ],
            )
        )
    return seeded
