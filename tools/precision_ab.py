"""The benchmark's early stop against its whole budget, row by row (`tools/gpu_verdict.sh`'s
`PRECISION_AB=N`): N runs of each kind, `/tmp/bench-full-<i>.json` and
`/tmp/bench-early-<i>.json`. Prints each row's timings, the spread between runs of one kind,
how far the early stop's median is from the whole budget's, and how many timed runs the
timings took with each.

    python -m tools.precision_ab N [--dir /tmp]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

SIDES = ("reference_ms", "kernel_ms")


def runs(folder: Path, kind: str, n: int) -> list[list[dict[str, Any]]]:
    return [
        json.loads((folder / f"bench-{kind}-{i}.json").read_text())["rows"] for i in range(1, n + 1)
    ]


def by_row(rows: list[list[dict[str, Any]]]) -> list[dict[str, list[float]]]:
    """Per row, each side's timings across the runs."""
    return [{side: [run[j][side] for run in rows] for side in SIDES} for j in range(len(rows[0]))]


def spread(values: list[float]) -> float:
    """Max minus min, in % of the median."""
    return (max(values) - min(values)) / statistics.median(values) * 100


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tools.precision_ab", description=__doc__)
    parser.add_argument("n", type=int, help="runs of each kind")
    parser.add_argument("--dir", type=Path, default=Path("/tmp"), help="where the JSON files are")
    args = parser.parse_args(argv)
    loaded = {kind: runs(args.dir, kind, args.n) for kind in ("full", "early")}
    full, early = by_row(loaded["full"]), by_row(loaded["early"])
    labels = [
        f"{r['dtype']} {tuple(r['size'])}->{tuple(r['output_size'])}" for r in loaded["full"][0]
    ]
    print(
        "| row | side | full ms (runs) | early ms (runs) | spread full % | spread early % "
        "| early/full - 1 % |"
    )
    print("|---|---|---|---|---:|---:|---:|")
    differences: list[float] = []
    spreads: dict[str, list[float]] = {"full": [], "early": []}
    for label, f, e in zip(labels, full, early, strict=True):
        for side in SIDES:
            d = (statistics.median(e[side]) / statistics.median(f[side]) - 1) * 100
            differences.append(abs(d))
            spreads["full"].append(spread(f[side]))
            spreads["early"].append(spread(e[side]))
            print(
                f"| {label} | {side[:-3]} | {' '.join(f'{x:.5f}' for x in f[side])} | "
                f"{' '.join(f'{x:.5f}' for x in e[side])} | {spread(f[side]):.2f} | "
                f"{spread(e[side]):.2f} | {d:+.2f} |"
            )
    print(
        f"early against full: median |difference| {statistics.median(differences):.2f} %, worst "
        f"{max(differences):.2f} %; spread between runs of one kind, median (worst): full "
        f"{statistics.median(spreads['full']):.2f} % ({max(spreads['full']):.2f} %), early "
        f"{statistics.median(spreads['early']):.2f} % ({max(spreads['early']):.2f} %)"
    )
    counts = {kind: timed_runs(rows) for kind, rows in loaded.items()}
    if all(counts.values()):
        print(
            "timed runs per timing, median (fewest-most): "
            + ", ".join(
                f"{kind} {statistics.median(c):g} ({min(c)}-{max(c)})" for kind, c in counts.items()
            )
        )


def timed_runs(loaded: list[list[dict[str, Any]]]) -> list[int]:
    """Every timing's run count in the runs of one kind (empty where the JSON has none)."""
    return [
        row[key]
        for rows in loaded
        for row in rows
        for key in ("reference_runs", "kernel_runs")
        if isinstance(row.get(key), int)
    ]


if __name__ == "__main__":
    main()
