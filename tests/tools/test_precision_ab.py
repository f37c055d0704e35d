"""tools.precision_ab: the benchmark's early stop compared with its whole budget, row by row."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import precision_ab


def _write(
    folder: Path, kind: str, i: int, kernel_ms: float, runs: tuple[int, int] | None = None
) -> None:
    row = {"dtype": "float16", "size": [1, 1, 8, 8, 8], "output_size": [4, 4, 4]}
    rows = [{**row, "reference_ms": 0.010, "kernel_ms": kernel_ms}]
    if runs is not None:
        rows[0]["reference_runs"], rows[0]["kernel_runs"] = runs
    (folder / f"bench-{kind}-{i}.json").write_text(json.dumps({"rows": rows}))


def test_differences_and_spreads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _write(tmp_path, "full", 1, 0.004)
    _write(tmp_path, "full", 2, 0.005)  # full: median 0.0045, spread 22.2 %
    _write(tmp_path, "early", 1, 0.0045)
    _write(tmp_path, "early", 2, 0.0054)  # early: median 0.00495, 10 % above full's
    precision_ab.main(["2", "--dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert "| float16 (1, 1, 8, 8, 8)->(4, 4, 4) | kernel | 0.00400 0.00500 |" in out
    assert out.strip().endswith(
        "early against full: median |difference| 5.00 %, worst 10.00 %; spread between runs "
        "of one kind, median (worst): full 11.11 % (22.22 %), early 9.09 % (18.18 %)"
    )


def test_run_counts_show_whether_the_early_stop_fired(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path, "full", 1, 0.004, runs=(400, 398))
    _write(tmp_path, "early", 1, 0.004, runs=(64, 128))
    precision_ab.main(["1", "--dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert out.strip().endswith(
        "timed runs per timing, median (fewest-most): full 399 (398-400), early 96 (64-128)"
    )
