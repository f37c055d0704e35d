"""The performance bars, computed from the benchmark harness's JSON files.

    python -m tools.bars --backward bwd.json --forward fwd.json \
        [--generic bwd_generic.json --mthreads bwd_mthreads.json]

Each bar is printed with its measured value and whether it is met; the exit status is 0 only
when every bar that the given files can decide is met. Row time over the memory floor is
1 / `bandwidth_fraction` (the floor is the minimum traffic at the measured copy bandwidth).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernels.benchmark.sizes import LARGE, TINY

Row = dict[str, Any]


@dataclass(frozen=True)
class Bar:
    name: str
    measured: str
    met: bool


def _rows(
    doc: dict[str, Any], sizes: Sequence[tuple[tuple[int, ...], tuple[int, ...]]]
) -> list[Row]:
    wanted = {(tuple(shape), tuple(out)) for shape, out in sizes}
    return [
        r for r in doc["rows"] if (tuple(r["size"]), tuple(r.get("output_size") or ())) in wanted
    ]


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def _floor_multiples(rows: Sequence[Row]) -> list[float]:
    return [1.0 / r["bandwidth_fraction"] for r in rows if r.get("bandwidth_fraction")]


def backward_bars(doc: dict[str, Any]) -> list[Bar]:
    large, tiny = _rows(doc, LARGE), _rows(doc, TINY)
    bars: list[Bar] = []
    if large:
        speedups = [r["speedup"] for r in large]
        slower = [r for r in large if r["speedup"] < 1.0]
        geo = geomean(speedups)
        bars.append(Bar("backward, large: geometric mean speedup >= 2.0", f"{geo:.2f}", geo >= 2.0))
        bars.append(
            Bar(
                "backward, large: no row slower than PyTorch",
                f"{len(slower)} of {len(large)} slower",
                not slower,
            )
        )
        floors = _floor_multiples(large)
        if floors:
            med = statistics.median(floors)
            bars.append(Bar("backward, large: median <= 1.25 x floor", f"{med:.2f} x", med <= 1.25))
    if tiny:
        fast = [r for r in tiny if r["speedup"] >= 1.5]
        bars.append(
            Bar(
                "backward, tiny: every row >= 1.5x faster",
                f"{len(fast)} of {len(tiny)} rows",
                len(fast) == len(tiny),
            )
        )
    return bars


def forward_bars(doc: dict[str, Any]) -> list[Bar]:
    large = _rows(doc, LARGE)
    if not large:
        return []
    geo = geomean([r["speedup"] for r in large])
    bars = [Bar("forward, large: geometric mean speedup >= 3", f"{geo:.2f}", geo >= 3.0)]
    floors = _floor_multiples(large)
    if floors:
        med = statistics.median(floors)
        bars.append(Bar("forward, large: median <= 1.5 x floor", f"{med:.2f} x", med <= 1.5))
    return bars


def vendor_bar(generic: dict[str, Any], mthreads: dict[str, Any]) -> list[Bar]:
    """The Moore Threads implementation within 10% of the generic on divisible sizes."""

    def divisible(r: Row) -> bool:
        out = r.get("output_size") or ()
        return bool(out) and all(i % o == 0 for i, o in zip(r["size"][-3:], out, strict=True))

    key = lambda r: (r["dtype"], tuple(r["size"]), tuple(r.get("output_size") or ()))  # noqa: E731
    gen = {key(r): r for r in generic["rows"] if divisible(r)}
    ratios = [
        r["kernel_ms"] / gen[key(r)]["kernel_ms"]
        for r in mthreads["rows"]
        if key(r) in gen and key(r)[1:] in {(tuple(s), tuple(o)) for s, o in LARGE}
    ]
    if not ratios:
        return []
    worst = max(ratios)
    return [
        Bar(
            "mthreads within 10% of generic, divisible large sizes",
            f"worst {worst:.2f} x generic",
            worst <= 1.10,
        )
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bars", description=__doc__)
    parser.add_argument("--backward", type=Path, help="harness JSON of the backward")
    parser.add_argument("--forward", type=Path, help="harness JSON of the forward")
    parser.add_argument("--generic", type=Path, help="backward JSON with --impl generic")
    parser.add_argument("--mthreads", type=Path, help="backward JSON with --impl mthreads")
    args = parser.parse_args(argv)
    load = lambda p: json.loads(p.read_text())  # noqa: E731
    bars: list[Bar] = []
    if args.backward:
        bars += backward_bars(load(args.backward))
    if args.forward:
        bars += forward_bars(load(args.forward))
    if args.generic and args.mthreads:
        bars += vendor_bar(load(args.generic), load(args.mthreads))
    if not bars:
        parser.error("no file given holds rows a bar is about")
    width = max(len(b.name) for b in bars)
    print(f"{'bar':<{width}}  {'measured':<22} met")
    for b in bars:
        print(f"{b.name:<{width}}  {b.measured:<22} {'yes' if b.met else 'NO'}")
    return 0 if all(b.met for b in bars) else 1


if __name__ == "__main__":
    sys.exit(main())
