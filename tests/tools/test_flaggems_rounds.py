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
