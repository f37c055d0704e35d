"""The timer-cost probe (tools/timer_cost.py) on the CPU: every reading's wall time is split
into the timer's phases (none counted twice), and the timer comes back as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.plugins import pytest_bench_rounds as timer
from tools import timer_cost


def test_a_readings_phases_add_up_to_its_wall_time_and_the_timer_is_restored(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    originals = (timer._single_ms, timer._host_ms, timer._wall_device_ms, timer._Flush.alone)
    assert timer_cost.main(["--readings", "3", "--json", str(tmp_path / "cost.json")]) == 0
    assert (timer._single_ms, timer._host_ms, timer._wall_device_ms, timer._Flush.alone) == (
        originals
    )
    assert timer._timings == []  # the probe's readings are not left for a round
    rows = json.loads((tmp_path / "cost.json").read_text())
    assert [r["case"] for r in rows] == ["vdot 64", "exp 1Mi", "adaptive_max_pool3d 8³→4³"]
    for row in rows:
        phases = row["phases_s"]
        assert set(phases) == set(timer_cost.PHASES)
        assert phases["host"] > 0 and phases["profiled"] > 0  # the two readings each ran
        # Medians of parts need not sum to the median of wholes, but nothing is counted twice.
        assert sum(phases.values()) <= row["wall_s"] * 1.5
        assert row["device_ms"] > 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("| case | device | reading ms | estimate ms")
    assert "| vdot 64 | cpu |" in out
