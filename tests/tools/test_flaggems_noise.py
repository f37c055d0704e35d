"""The reader of the FlagGems noise measurement: rows from record logs, their spread between
processes and within one, and the first process against the rest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools.flaggems_noise import main, records

SHAPE = [[1, 1, 4, 4, 4], [1, 1, 8, 8, 8]]


def _log(path: Path, latencies: list[float]) -> None:
    """One FlagGems record line per latency, as `--record log` writes them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        "[INFO] Benchmark record logger enabled",
        *(
            "[INFO] "
            + json.dumps(
                {
                    "op_name": "op",
                    "dtype": "torch.float16",
                    "result": [{"latency_base": 0.0065, "latency": lat, "shape_detail": SHAPE}],
                }
            )
            for lat in latencies
        ),
    ]
    path.write_text("\n".join(lines) + "\n")


def test_spreads_between_processes_within_one_and_the_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for i, latency in enumerate([0.40, 0.10, 0.11, 0.10], start=1):
        _log(tmp_path / f"proc{i}" / "result_x.log", [latency])
    _log(tmp_path / "inproc" / "result_y.log", [0.10, 0.12])
    assert [r["latency"] for r in records(tmp_path / "inproc" / "result_y.log", "op")] == [
        0.10, 0.12,
    ]  # fmt: skip
    assert records(tmp_path / "inproc" / "result_y.log", "other") == []
    main(tmp_path, "op")
    row = [line for line in capsys.readouterr().out.splitlines() if line.startswith("float16 ")]
    assert len(row) == 1
    # Between: median 0.105, spread 4.00x; the first is 4.00x the rest's median; within 1.20x.
    assert "0.1050 x4.00" in row[0] and " 4.00 " in row[0] and "0.1100 x1.20" in row[0]
