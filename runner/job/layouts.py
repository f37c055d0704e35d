"""Repository layouts other than this project's own, chosen from what the checkout contains.

`flaggems`: a FlagGems-style repository (`src/flag_gems/`): accuracy tests under `tests/`
marked with the operator, benchmarks in `benchmark/test_<op>.py` whose `--record log` writes
lines `[INFO] {"op_name": ..., "dtype": ..., "result": [{"shape_detail": ..., "latency_base":
..., "latency": ..., "speedup": ...}, ...]}`. The steps are in the workflows' `layouts:`; this
module detects the layout and reads its benchmark records into a BenchmarkResult.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from runner.results.results import ResultsError, read_artifact
from workflows.models import BenchmarkResult, BenchmarkRow
from workflows.spec import FLAGGEMS


def detect(checkout: Path) -> str | None:
    """The layout of a checkout; None for the default (this project's)."""
    if (checkout / "src" / "flag_gems").is_dir() or (checkout / "flag_gems").is_dir():
        return FLAGGEMS
    return None


TEST_ROOT = "tests"
MAX_TEST_FILE = 2 * 1024 * 1024


def test_files(checkout: Path, op: str, root: str = TEST_ROOT) -> list[str]:
    """The test files under `root` that can hold `op`'s tests (they name its marker), so a
    job collects a few files instead of a whole suite; `root` itself when none does (pytest
    then says that nothing is marked with the operator)."""
    marker = re.compile(rf"\bmark\.{re.escape(op)}\b")
    found: list[str] = []
    base = checkout / root
    for path in sorted(base.rglob("*.py")) if base.is_dir() else []:
        try:
            if path.is_symlink() or path.stat().st_size > MAX_TEST_FILE:
                continue
            if marker.search(path.read_text(errors="replace")):
                found.append(str(path.relative_to(checkout)))
        except OSError:
            continue
    return found or [root]


def _ints(value: Any) -> list[int] | None:
    if isinstance(value, list) and value and all(isinstance(d, int) for d in value):
        return list(value)
    return None


def size_of(detail: Any, op: str) -> tuple[list[int], list[int] | None]:
    """The input shape and the output size a row is about, from FlagGems' `shape_detail`:
    the shapes of the benchmarked call's arguments (`record_shapes` of its positional
    arguments). A backward call is (grad_output, input, ...): the input is the second, the
    output size the gradient's dimensions past batch and channel. A forward call with an
    output size is (input, output_size). Anything else: the first argument."""
    if not isinstance(detail, list):
        return [], None
    args = [_ints(d) for d in detail] if detail and isinstance(detail[0], list) else [_ints(detail)]
    first = args[0] or []
    if op.endswith("_backward") and len(args) >= 2 and args[0] and args[1]:
        grad, inp = args[0], args[1]
        if len(grad) == len(inp) >= 3 and grad != inp:
            return inp, grad[2:]
    if len(args) >= 2 and args[1] and first and len(args[1]) < len(first):
        return first, args[1]
    return first, None


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
            size, output = size_of(item.get("shape_detail", item.get("legacy_shape")), op)
            rows.append(
                BenchmarkRow(
                    dtype=dtype,
                    size=size,
                    output_size=output,
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
