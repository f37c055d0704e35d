"""`/test profile` through the service against the sandbox: the grammar (through the command
registry), the reply and trust of `/test`, a job that carries the profile option to its runner,
the artifacts route (held jobs only, names checked, gzip, capped with a 413), the Profile
section in the result comment, and the traces offered on the job's page."""

from __future__ import annotations

import gzip
import json
import threading
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from service.db.engine import Database
from service.db.migrate import upgrade
from service.db.models import Job, JobArtifact
from service.queue.artifacts import MAX_ARTIFACT_BYTES
from service.queue.retention import Pruner, Retention
from service.receive.commands import (
    REGISTRY,
    CommandError,
    Target,
    format_command,
    parse_comment,
)
from service.receive.commands.profile import ProfileCommand
from tests.service.seeding import seed
from tests.service.test_flow import BOT, REPO, Flow, auth, make_flow
from workflows.models import (
    AccuracyResult,
    BenchmarkResult,
    BenchmarkRow,
    Change,
    JobResult,
    JobStatus,
    KernelTime,
    ProfiledRow,
    ProfileResult,
)
from workflows.spec import backend_names, load_workflows

BACKENDS = backend_names(load_workflows())
NOW = datetime(2027, 6, 1, 12, 0, tzinfo=UTC)


def parse(body: str) -> list[object]:
    return parse_comment(body, BACKENDS, ["mthreads"])


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("/test profile gelu:nvidia", ProfileCommand((Target("gelu", "nvidia"),))),
        ("/test PROFILE gelu:cuda", ProfileCommand((Target("gelu", "nvidia"),))),
        ("/test profile gelu:cpu vs v1.0", ProfileCommand((Target("gelu", "cpu"),), "v1.0")),
        (
            "/test profile add,mul:cpu",
            ProfileCommand((Target("add", "cpu"), Target("mul", "cpu"))),
        ),
    ],
)
def test_the_grammar_and_its_canonical_form(body: str, expected: ProfileCommand) -> None:
    assert parse(body) == [expected]
    assert parse(format_command(expected)) == [expected]


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ("/test profile", "names what to profile"),
        ("/test profile gelu", "names no backend"),
        ("/test profile gelu:cpu --no-bench", "takes no flags"),
        ("/test profile gelu:cpu vs", "takes one branch"),
        ("/test profile gelu:cpu vs a..b", "takes one branch"),
        ("/test profile a,b,c:cpu,nvidia", "at most 4"),
        ("/test profile gelu:cpux", "cpux"),
    ],
)
def test_what_is_wrong_is_said(body: str, fragment: str) -> None:
    (error,) = parse(body)
    assert isinstance(error, CommandError) and fragment in error.message, error


def test_help_and_usage_come_from_the_registry() -> None:
    rows = dict(REGISTRY.help_rows())
    assert "`/test profile OP:BACKEND`" in rows
    assert "not part of the verdict" in rows["`/test profile OP:BACKEND`"]
    assert "`/test profile OP:BACKEND [vs REF]`" in REGISTRY.usage


def _trace() -> bytes:
    events = [
        {"ph": "X", "cat": "user_annotation", "name": "ondemand.call:add", "ts": 0, "dur": 9},
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 1, "dur": 7},
    ]
    return gzip.compress(json.dumps({"traceEvents": events}).encode())


def _result(sha: str) -> JobResult:
    change = Change(rounds=8, ratio=2.0, low=1.9, high=2.1)
    row = BenchmarkRow(
        dtype="float32", size=[64], reference_ms=0.01, kernel_ms=0.02, speedup=0.5,
        before_kernel_ms=0.01, change=change,
    )  # fmt: skip
    kernel = KernelTime(name="add_kernel", before_us=10.0, after_us=20.0, after_calls=1)
    profiled = ProfiledRow(
        dtype="float32", size=[64], ratio=2.0, before_host_us=12.0, after_host_us=23.0,
        kernels=[kernel], traces=["profile-after-row-0.json"],
    )  # fmt: skip
    return JobResult(
        status=JobStatus.succeeded,
        sha=sha,
        accuracy=AccuracyResult(passed=3),
        benchmark=BenchmarkResult(op="add", rows=[row], performance=True),
        profile=ProfileResult(profiler="cpu,cuda", rows=[profiled]),
    )


def _put(flow: Flow, token: str, job_id: int, name: str, data: bytes) -> httpx.Response:
    url = f"{flow.svc.url}/api/v1/jobs/{job_id}/artifacts/{name}"
    return httpx.put(url, content=data, headers=auth(token), timeout=10)


def test_a_profile_job_runs_uploads_its_traces_and_reports_them(tmp_path: Path) -> None:
    with make_flow(tmp_path) as flow:
        flow.comment("/test profile add:cpu", user="mallory")  # /test's trust decision
        refused = flow.admin.wait_for_comment(REPO, flow.pr, user=BOT, contains="mallory")
        assert "read" in refused["body"]
        flow.wait_until(flow.quiet)
        assert flow.jobs() == []

        flow.comment("/test profile add:cpu")
        flow.wait_until(lambda: len(flow.jobs()) == 1)
        (job,) = flow.jobs()
        assert job.profile and job.bench and job.compare
        flow.comment("/test profile add:cpu")  # answered as /test answers a duplicate
        dup = flow.admin.wait_for_comment(REPO, flow.pr, user=BOT, contains="already queued")
        assert f"/jobs/{job.id}" in dup["body"]

        _, token = flow.svc.register("cpu-1", ["cpu"])
        _, other = flow.svc.register("cpu-2", ["cpu"])
        api = f"{flow.svc.url}/api/v1/jobs"
        spec = httpx.post(
            f"{api}/claim", json={"wait_s": 5}, headers=auth(token), timeout=30
        ).json()
        assert spec["id"] == job.id and spec["options"]["profile"] is True

        name = "profile-after-row-0.json"
        assert _put(flow, other, job.id, name, _trace()).status_code == 404  # not its job
        assert _put(flow, token, job.id, "../escape", _trace()).status_code in (404, 422)
        assert _put(flow, token, job.id, ".hidden", _trace()).status_code == 422
        assert _put(flow, token, job.id, name, b"{}").status_code == 415  # gzip only
        big = _put(flow, token, job.id, name, b"\x1f\x8b" + b"0" * MAX_ARTIFACT_BYTES)
        assert big.status_code == 413 and "at most" in big.json()["detail"]
        assert _put(flow, token, job.id, name, _trace()).status_code == 204

        result = _result(spec["sha"]).model_dump(mode="json")
        done = httpx.post(f"{api}/{job.id}/complete", json=result, headers=auth(token))
        assert done.json() == {"status": "succeeded"}
        flow.wait_until(flow.quiet)

        body = next(c["body"] for c in flow.bot_comments() if "ondemand:add:cpu" in c["body"])
        profile = body[body.index("#### Profile") :]
        assert "Not part of the verdict" in profile
        assert "| `add_kernel` | 1 | 10 µs → 20 µs | +100 % slower |" in profile
        assert "the profiler (cpu, cuda)" in profile
        assert "+100 % slower" in profile and f"/jobs/{job.id}#profile" in profile

        page = httpx.get(f"{flow.svc.url}/jobs/{job.id}").text
        assert 'id="profile"' in page and f"/jobs/{job.id}/artifacts/{name}" in page
        got = httpx.get(f"{flow.svc.url}/jobs/{job.id}/artifacts/{name}")
        assert got.status_code == 200 and got.headers["content-type"] == "application/gzip"
        assert "traceEvents" in json.loads(gzip.decompress(got.content))
        missing = httpx.get(f"{flow.svc.url}/jobs/{job.id}/artifacts/none.json")
        assert missing.status_code == 404
        # The job is no longer held: nothing more is taken for it.
        assert _put(flow, token, job.id, name, _trace()).status_code == 404


def test_a_private_jobs_traces_need_its_key(tmp_path: Path) -> None:
    with make_flow(tmp_path, private=True) as flow:
        flow.comment("/test profile add:cpu")
        flow.wait_until(lambda: len(flow.jobs()) == 1)
        _, token = flow.svc.register("cpu-1", ["cpu"])
        api = f"{flow.svc.url}/api/v1/jobs"
        spec = httpx.post(
            f"{api}/claim", json={"wait_s": 5}, headers=auth(token), timeout=30
        ).json()
        name = "profile-before-row-0.json"
        assert _put(flow, token, spec["id"], name, _trace()).status_code == 204
        url = f"{flow.svc.url}/jobs/{spec['id']}/artifacts/{name}"
        assert httpx.get(url).status_code == 404
        key = flow.svc.service.links.key(spec["id"])
        assert httpx.get(url, params={"key": key}).status_code == 200


def test_the_pruner_takes_a_jobs_artifacts_with_it(tmp_path: Path) -> None:
    db = Database.connect(f"sqlite:///{tmp_path / 'prune.db'}")
    upgrade(db.engine)
    try:
        seeded = seed(db, NOW, old=6, middle=2, recent=2, active=1, targets=2, done_rows=0)
        with db.writes() as session, session.begin():
            kept = session.scalars(select(Job.id).where(Job.id.not_in(seeded.gone))).all()
            for job_id in [*seeded.gone, *kept]:
                session.add(JobArtifact(job_id=job_id, name="t.json", data=b"x", size=1))
        done = Pruner(db, Retention(), threading.Event()).prune(NOW)
        assert done.jobs == len(seeded.gone) > 0
        with db.reads() as session:
            left = set(session.scalars(select(JobArtifact.job_id)))
        assert left == set(kept)
    finally:
        db.dispose()
