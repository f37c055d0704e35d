"""tools.slots_bars: the reader's bands alone and with neighbours, flagged and noisy rows and
jobs per hour on results with known verdicts; the driver's slots (device, cores, caches, the
neighbours busy while slot 0's A/A jobs run) with a fake `ondemand run`."""

from __future__ import annotations

import os
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from runner.daemon.cores import host_cores
from tests.tools.test_flaggems_bars import change, result, same, save
from tools import slots_bars as sb
from tools.flaggems_bars import load_runs
from workflows.models import JobResult

HOUR = datetime(2026, 12, 7, 10, 0)


def test_bands_alone_and_with_neighbours_flags_and_jobs_per_hour(tmp_path: Path) -> None:
    for i in (1, 2):
        save(tmp_path, f"aa{i}-alone", result(same(4, band=0.02)), step="alone")
        busy = [change(1.3, 0.02), *same(3, band=0.06)]  # one row flagged, wider bands
        save(tmp_path, f"aa{i}-busy", result(busy), step="busy")
    for i in range(2):  # one slot: two jobs in the hour
        start = HOUR + timedelta(minutes=30 * i)
        save(
            tmp_path,
            f"n-tp1-{i}",
            result([]),
            step="throughput-1",
            kind="neighbour",
            started=start.isoformat(),
            ended=(start + timedelta(minutes=30)).isoformat(),
        )
    for i in range(4):  # two slots: four jobs in the hour, and one without a result
        start = HOUR + timedelta(minutes=30 * (i // 2))
        save(
            tmp_path,
            f"n-tp2-{i}",
            result([]),
            step="throughput-2",
            kind="neighbour",
            started=start.isoformat(),
            ended=(start + timedelta(minutes=30)).isoformat(),
        )
    save(tmp_path, "n-lost", None, step="throughput-2", kind="neighbour")
    text = sb.report(load_runs([tmp_path]), 0.10)
    lines = text.splitlines()
    first = next(line for line in lines if "1,1,8,1→4:" in line)
    assert "±2.0 % · ±2.0 % (×1.0) · 0/2 FLAGGED" in first, first
    second = next(line for line in lines if "1,1,8,2→4:" in line)
    assert "±2.0 % · ±6.0 % (×3.0) · 0/0 · 0/0" in second, second
    assert "alone: 0 of 8 row verdicts flagged, 0 too noisy" in text
    assert "with neighbours: 2 of 8 row verdicts flagged" in text
    assert "throughput: 4.0 jobs/h on 2 slots, 2.0 on one (×2.00)" in text
    assert "no result: n-lost" in text


def _tiny_source(top: Path) -> Path:
    for op in ("a_op", "b_op"):
        path = top / "kernels" / "ops" / op / "__init__.py"
        path.parent.mkdir(parents=True)
        path.write_text(f"# {op}: the first comment\n# the second\ndef {op}():\n    return 1\n")
    return top


def test_the_driver_runs_each_job_as_its_slot_would(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[dict[str, Any]] = []
    lock = threading.Lock()

    def fake_run(argv: list[str], env: dict[str, str], **_: Any) -> Any:
        """`ondemand run`: what the job would see, and a result; the device question: its
        answer."""
        done = type("Done", (), {"returncode": 0, "stdout": b"", "stderr": b""})()
        if "--ref" not in argv:
            done.stdout = f"1 device {env['CUDA_VISIBLE_DEVICES']}".encode()
            return done
        with lock:
            seen.append({"ref": argv[argv.index("--ref") + 1], "cache": env["XDG_CACHE_HOME"],
                         "device": env["CUDA_VISIBLE_DEVICES"],
                         "cores": sorted(os.sched_getaffinity(0))})  # fmt: skip
        time.sleep(0.05)
        Path(argv[argv.index("--json") + 1]).write_text(
            JobResult(status="succeeded", sha="a" * 40).model_dump_json()
        )
        return done

    args = sb.drive_parser().parse_args([
        "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"), "--slots", "2",
        "--sources", "self", "--self-repo", str(_tiny_source(tmp_path / "src")),
        "--self-op", "a_op", "--self-neighbours", "b_op", "--aa", "2", "--backend", "cpu",
        "--cores-per-slot", "1",
    ])  # fmt: skip
    assert sb.drive(args, run=fake_run) == 0
    assert "slot 1 (CUDA_VISIBLE_DEVICES=1) sees: 1 device 1" in capsys.readouterr().out
    aa = [s for s in seen if s["ref"].startswith("a_op-aa")]
    neighbours = [s for s in seen if s["ref"] == "b_op-n"]
    assert len(aa) == 4 and {s["device"] for s in aa} == {"0"}  # alone and busy, slot 0
    assert {s["device"] for s in neighbours} == {"0", "1"}  # busy on 1; throughput on both
    assert all(s["cache"].endswith(f"cache-slot-{s['device']}") for s in seen)
    cores = host_cores()
    if len(cores) >= 2:
        assert all(s["cores"] == [cores[int(s["device"])]] for s in seen), seen
    runs = {r.name: r for r in load_runs([tmp_path / "out"])}
    steps = {r.meta["step"] for r in runs.values()}
    assert steps == {"alone", "busy", "throughput-1", "throughput-2"}
    assert any(r.meta["step"] == "busy" and r.meta["slot"] == 1 for r in runs.values())
