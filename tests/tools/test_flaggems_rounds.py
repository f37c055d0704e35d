"""The noise reader of the bars' device calls (tools/flaggems_rounds.py) on files of known
spreads: a JobResult's per-round device samples and the workers' answer files, matched by
commit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import flaggems_rounds

SHA = "ab" * 20


def _answer(path: Path, number: int, readings: list[tuple[float, float]]) -> None:
    """An answer file of round `number`: per row, the reference's reading then the kernel's."""
    timings = []
    for host, device in readings:
        timings += [{"host_ms": 0.01, "device_ms": 0.003}, {"host_ms": host, "device_ms": device}]
    path.mkdir(parents=True, exist_ok=True)
    (path / f"round-{number}.json").write_text(json.dumps({"round": number, "timings": timings}))


def _job(top: Path) -> None:
    """One A/A job of two rows: the device within ±1 % a side, one process's host 1.5× the
    other's on the second row; the first round's answer holds extra readings (a tuner's)."""
    rows = [
        {"kernel_samples_ms": [0.010, 0.0101, 0.0099], "before_kernel_samples_ms": [0.010] * 3},
        {"kernel_samples_ms": [0.020] * 3, "before_kernel_samples_ms": [0.0202, 0.0198, 0.020]},
    ]
    (top / "jobs").mkdir(parents=True)
    result = {"sha": SHA, "benchmark": {"rows": rows}, "status": "succeeded"}
    (top / "jobs" / "fg-op-aa1.json").write_text(json.dumps(result))
    (top / "jobs" / "fg-op-aa1.meta.json").write_text("{}")
    run = top / "runs" / "ondemand-run-op-x"
    run.mkdir(parents=True)
    (run / "job.log").write_text(f"[ondemand] job 0: op on nvidia at {SHA} (attempt 1)\n")
    artifacts = run / "job" / "artifacts"
    _answer(artifacts / "bench-rounds-after", 1, [(9.0, 1.0)] * 5)  # a tuner's too: not read
    _answer(artifacts / "bench-rounds-base", 1, [(9.0, 1.0)] * 5)
    for number, scale in ((2, 1.0), (3, 1.2)):
        _answer(artifacts / "bench-rounds-after", number, [(0.5 * scale, 0.01), (0.6, 0.02)])
        _answer(artifacts / "bench-rounds-base", number, [(0.5 * scale, 0.01), (0.4, 0.02)])


def test_the_reader_splits_device_and_host_noise_within_and_between_processes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _job(tmp_path)
    (spread,) = flaggems_rounds.load([tmp_path])
    assert spread.name == "fg-op-aa1"
    assert spread.host_after == [[0.5, 0.6], [0.6, 0.6]]  # rounds 2 and 3 only
    f = flaggems_rounds.figures(spread)
    assert f.rows == 2
    assert f.device_within == pytest.approx(1.0101, abs=1e-3)  # median of 1.0202, 1.0, 1.0, 1.0202
    assert f.device_between == pytest.approx(0.0, abs=1e-9)
    assert f.worst_host_between == pytest.approx(0.5)  # 0.6 / 0.4
    assert f.host_between == pytest.approx(0.25)  # the median of 0 and 0.5
    assert f.host_within == pytest.approx(1.1)  # median of 1.2, 1.2, 1.0, 1.0
    assert f.host_over_device == pytest.approx(42.5)  # median of 55 and 30
    assert flaggems_rounds.main([str(tmp_path)]) == 0
    assert "| fg-op-aa1 | 2 | 1.01× | 0.0 % · 0.0 % | 1.10× | 25.0 % · 50.0 % | 42.50× |" in (
        capsys.readouterr().out
    )


def test_a_directory_without_a_comparison_says_so(tmp_path: Path) -> None:
    assert flaggems_rounds.main([str(tmp_path)]) == 1


def test_each_job_gets_the_clocks_nvidia_smi_logged_within_its_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    for name, start, end in (("fg-a", "12:00:00", "12:00:01"), ("fg-b", "12:00:02", "12:00:03")):
        meta = {"name": name, "started": f"2026-12-05T{start}", "ended": f"2026-12-05T{end}"}
        (jobs / f"{name}.meta.json").write_text(json.dumps(meta))
    (jobs / "old.meta.json").write_text(json.dumps({"name": "old"}))  # before windows: left out
    header = (
        "timestamp, clocks.current.sm [MHz], clocks.current.memory [MHz], "
        "clocks_event_reasons.active, temperature.gpu, power.draw [W]"
    )
    rows = [  # the first job at full clocks, the second slowed down once
        "2026/12/05 12:00:00.200, 1980 MHz, 2619 MHz, 0x0000000000000000, 40, 120.5 W",
        "2026/12/05 12:00:00.800, 1980 MHz, 2619 MHz, 0x0000000000000000, 41, 300.0 W",
        "2026/12/05 12:00:02.100, 345 MHz, 2619 MHz, 0x0000000000000001, 44, 310.0 W",
        "2026/12/05 12:00:02.500, 1410 MHz, 2619 MHz, 0x0000000000000004, 45, 690.0 W",
        "2026/12/05 12:00:02.900, 1755 MHz, 2619 MHz, 0x0000000000000000, 45, 400.0 W",
    ]
    (tmp_path / "smi.csv").write_text("\n".join([header, *rows]) + "\n")
    (a_name, a), (_, b) = flaggems_rounds.job_clocks([tmp_path])
    assert (a_name, a.samples, a.sm_mhz) == ("fg-a", 2, (1980, 1980, 1980))
    assert (b.samples, b.sm_mhz, b.mem_mhz) == (3, (345, 1410, 1755), 2619)
    assert b.busy_sm_mhz == (1410, 1582.5, 1755)  # the idle sample left out
    assert b.reasons == {"0x0000000000000001": 1, "0x0000000000000004": 1, "0x0000000000000000": 1}
    assert (b.temperature_c, b.power_w) == ((44, 45), (310, 690))
    assert flaggems_rounds.main([str(tmp_path), "--clocks-only"]) == 0
    out = capsys.readouterr().out
    assert "| fg-b | 3 | 1410 / 1582 / 1755 | 345–1755 | 2619 |" in out
