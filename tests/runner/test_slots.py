"""A runner's slots kept apart: the real daemon as a process with two slots (`--devices 0,1`,
one core each) runs two jobs at once against the real service, and each job's step records
what it sees (its visible-devices variable, its CPU affinity, its directories) before its
tests run. Also the cores' partition (a pure function) and the option's refusals."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from ondemand.doctor import Level
from runner.cli import daemon_parser, read_options
from runner.daemon.cores import host_cores, partition, span
from runner.doctor import slot_findings
from service.app import create_app
from tests.runner.test_daemon_service import REGISTRATION, Daemon, Service
from tests.runner.tinyrepo import TinyRepo
from tests.service.helpers import service_settings, sqlite_at_head
from tests.support.live import live_server
from workflows.models import JobStatus
from workflows.spec import WORKFLOWS_DIR

MARKER = "slot-marker"
# The step's first process: it says what it sees, leaves a file in each directory it was
# given, then becomes the workflow's pytest (same process, environment and affinity).
RECORD = f"""\
import json, os, pathlib, sys
wrote = []
for where in (os.getcwd(), os.environ["HOME"], os.environ["TMPDIR"]):
    path = pathlib.Path(where, {MARKER!r})
    path.write_text("x")
    wrote.append(str(path.resolve()))
seen = dict(visible=os.environ.get("CUDA_VISIBLE_DEVICES"), wrote=wrote,
            cores=sorted(os.sched_getaffinity(0)))
print("SLOT-RECORD " + json.dumps(seen), flush=True)
os.execv(sys.executable, [sys.executable, *sys.argv[1:]])
"""


def test_the_cores_are_split_in_blocks_with_the_rest_spare() -> None:
    plan = partition(range(10), 4, 2)
    assert plan.slots == ((0, 1), (2, 3), (4, 5), (6, 7)) and plan.spare == (8, 9)
    assert partition(range(8), 4, "auto").cores(3) == (6, 7)
    assert partition([5, 1, 3, 2], 2, "auto").slots == ((1, 2), (3, 5))
    # Below the minimum: nobody pinned, and why.
    short = partition(range(3), 2, "auto")
    assert short.cores(0) is None and "fewer than 2 each" in (short.unpinned or "")
    assert "need 8" in (partition(range(4), 2, 4).unpinned or "")
    assert partition(range(64), 1, "auto").cores(0) is None  # one slot: every core, as before
    assert partition(range(8), 2, "off").cores(1) is None
    assert span([0, 1, 2, 5, 7, 8]) == "0-2,5,7-8" and span([3]) == "3"


def test_more_cores_than_the_host_has_is_refused_in_one_line(tmp_path: Path) -> None:
    parser = daemon_parser()
    many = str(len(host_cores()) + 1)
    argv = ["--service", "http://127.0.0.1:9", "--backend", "cpu", "--devices", "0",
            "--cores-per-slot", many, "--state-dir", str(tmp_path), "--no-job-user"]  # fmt: skip
    options = read_options(parser, parser.parse_args(argv), argv)
    assert [p for p in options.problems if p.startswith(f"--cores-per-slot={many}:")]
    with pytest.raises(SystemExit):
        parser.parse_args([*argv[:-4], "--cores-per-slot", "some"])


def test_the_doctor_names_each_slots_device_and_cores() -> None:
    (found,) = slot_findings(["0", "1"], partition(range(8), 2, 3))
    assert found.level is Level.ok, found
    assert "slot 1: device 1, cores 3-5" in found.detail and "spare cores 6-7" in found.detail
    (shared,) = slot_findings(["0", "1"], partition(range(2), 2, "auto"))
    assert shared.level is Level.warn and "fewer than 2 each" in shared.detail, shared
    assert "all cores (unpinned)" in shared.detail


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    settings = service_settings(
        sqlite_at_head(tmp_path / "slots.db"), registration_tokens=[REGISTRATION]
    )
    app = create_app(settings)
    with live_server(app) as url:
        yield Service(url, app.state.service)


def _workflows(directory: Path) -> Path:
    """The cpu workflow with a visible-devices variable, a device check that passes at once,
    and the recording step in front of its accuracy step's pytest."""
    record = directory / "record.py"
    record.write_text(RECORD)
    cpu = yaml.safe_load((WORKFLOWS_DIR / "cpu.yaml").read_text())
    cpu["device_check"] = ["{python}", "-c", "pass"]
    cpu["visible_devices_var"] = "CUDA_VISIBLE_DEVICES"
    accuracy = cpu["steps"][0]
    accuracy["argv"] = ["{python}", str(record), *accuracy["argv"][1:]]
    (directory / "cpu.yaml").write_text(yaml.safe_dump(cpu))
    return directory


@pytest.mark.skipif(len(host_cores()) < 2, reason="two slots of one core each need two cores")
def test_two_slots_run_two_jobs_apart(
    service: Service, tiny_repo: TinyRepo, tmp_path: Path
) -> None:
    """Each job sees one device, its own and not the other's, one core of its own, and
    writes only under its slot's directory (emptied after it)."""
    (tmp_path / "flows").mkdir()
    flows = _workflows(tmp_path / "flows")
    jobs = [service.enqueue(tiny_repo, op, bench=False) for op in ("good_op", "bad_op")]
    state = tmp_path / "runner-s"
    daemon = Daemon(service.url, state, flows, "--devices", "0,1", "--cores-per-slot", "1")
    try:
        for job, verdict in zip(jobs, (JobStatus.succeeded, JobStatus.failed), strict=True):
            status = service.wait(job, JobStatus.succeeded, JobStatus.failed, JobStatus.errored)
            assert status is verdict, service.log(job)
        output = daemon.output()
    finally:
        daemon.stop()
    cores = host_cores()
    assert f"slot 1: device 1, cores {cores[1]}" in output, output[-2000:]
    results = [service.result(job) for job in jobs]
    slots = [r.environment.slot for r in results]
    assert all(slots) and {s.index for s in slots if s} == {0, 1}
    (a0, a1), (b0, b1) = [(r.started_at, r.finished_at) for r in results]
    assert a0 and a1 and b0 and b1 and a0 < b1 and b0 < a1, "not at the same time"
    work = state / "work" / "jobs"
    for job, slot in zip(jobs, slots, strict=True):
        assert slot is not None
        line = re.search(r"SLOT-RECORD (\{.*\})", service.log(job))
        assert line, service.log(job)
        seen = json.loads(line.group(1))
        assert seen["visible"] == str(slot.index) == slot.device  # one device, its own
        assert seen["cores"] == [cores[slot.index]] and slot.cores == str(cores[slot.index])
        own = (work / f"slot-{slot.index}").resolve()
        assert all(Path(p).is_relative_to(own) for p in seen["wrote"]), (own, seen["wrote"])
    left = list(state.rglob(MARKER))
    assert left == [], f"a job's files outlived it: {left}"
