"""Repository layouts other than this project's own, chosen from what the checkout contains.

`flaggems`: a FlagGems-style repository (`src/flag_gems/`): accuracy tests under `tests/`
marked with the operator, benchmarks in `benchmark/test_<op>.py` whose `--record log` writes
lines `[INFO] {"op_name": ..., "dtype": ..., "result": [{"shape_detail": ..., "latency_base":
..., "latency": ..., "speedup": ...}, ...]}`. The steps are in the workflows' `layouts:`; this
module detects the layout and reads its benchmark records into a BenchmarkResult.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from runner.results import ResultsError, read_artifact
from workflows.models import BenchmarkResult, BenchmarkRow

FLAGGEMS = "flaggems"


def detect(checkout: Path) -> str | None:
    """The layout of a checkout; None for the default (this project's)."""
    if (checkout / "src" / "flag_gems").is_dir() or (checkout / "flag_gems").is_dir():
        return FLAGGEMS
    return None


def _shape(detail: Any) -> list[int]:
    """FlagGems' shape_detail is a list of argument shapes; the first is the input."""
    if isinstance(detail, list) and detail and isinstance(detail[0], list):
        detail = detail[0]
    if isinstance(detail, list) and all(isinstance(d, int) for d in detail):
        return list(detail)
    return []


def _records(lines: Iterable[str]) -> Iterable[dict[str, Any]]:
    for line in lines:
        start = line.find("{")
        if start < 0:
            continue
        try:
            record = json.loads(line[start:])
        except json.JSONDecodeError:
            continue
        if isinstance(record, dict) and isinstance(record.get("result"), list):
            yield record


def parse_flaggems_records(lines: Iterable[str], op: str) -> BenchmarkResult:
    """Rows from FlagGems benchmark records of `op` (others are ignored)."""
    rows: list[BenchmarkRow] = []
    for record in _records(lines):
        if record.get("op_name") not in (op, None):
            continue
        dtype = str(record.get("dtype", "")).removeprefix("torch.")
        for item in record["result"]:
            if not isinstance(item, dict):
                continue
            base, lat = item.get("latency_base"), item.get("latency")
            if not isinstance(base, int | float) or not isinstance(lat, int | float) or lat <= 0:
                continue
            speedup = item.get("speedup")
            rows.append(
                BenchmarkRow(
                    dtype=dtype,
                    size=_shape(item.get("shape_detail", item.get("legacy_shape"))),
                    reference_ms=float(base),
                    kernel_ms=float(lat),
                    speedup=float(speedup) if isinstance(speedup, int | float) else base / lat,
                )
            )
    mean, geo = BenchmarkResult.means([r.speedup for r in rows])
    return BenchmarkResult(
        op=op, rows=rows, arithmetic_mean_speedup=mean, geometric_mean_speedup=geo
    )


def read_flaggems_records(paths: Iterable[Path], op: str) -> BenchmarkResult:
    lines: list[str] = []
    for path in paths:
        try:
            lines += read_artifact(path).splitlines()
        except OSError as exc:
            raise ResultsError(f"cannot read {path.name}: {exc.strerror}") from exc
    return parse_flaggems_records(lines, op)
