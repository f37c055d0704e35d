"""The performance bars, computed from the benchmark harness's JSON files.

    python -m tools.bars --backward bwd.json --forward fwd.json [--bounds bounds.json] \
        [--generic bwd_generic.json --mthreads bwd_mthreads.json] \
        [--runs fresh=run1.json warm=run2.json] [--do-bench probe.json]

Each bar is printed with its measured value and whether it is met; the exit status is 0 only
when every bar that the given files can decide is met. The reach is the mover's time for a
row (a kernel that only moves the row's minimum bytes, timed the same way in the same
process): from `tools.bar_bounds --json`, else from benchmark runs made with `--reach`.
`--runs` are `ondemand run --json` results, the first on a fresh runner, the rest warm
(`tools.gpu_verdict.sh` makes them all in one go); `--do-bench` is `tools.host_probe
--do-bench N --json`: the tiny rows under Triton's own `do_bench`.
"""

from __future__ import annotations

import argparse
import json
import math
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


def backward_bars(doc: dict[str, Any]) -> list[Bar]:
    large, tiny = _rows(doc, LARGE), _rows(doc, TINY)
    bars: list[Bar] = []
    if large:
        speedups = [r["speedup"] for r in large]
        slower = [r for r in large if r["speedup"] < 1.0]
        geo = geomean(speedups)
        bars.append(Bar("backward, large: geometric mean speedup >= 1.6", f"{geo:.2f}", geo >= 1.6))
        bars.append(
            Bar(
                "backward, large: no row slower than PyTorch",
                f"{len(slower)} of {len(large)} slower",
                not slower,
            )
        )
    if tiny:
        fast = [r for r in tiny if r["speedup"] >= 1.5]
        bars.append(
            Bar(
                "backward, tiny: every row >= 1.5x faster",
                f"{len(fast)} of {len(tiny)} rows",
                len(fast) == len(tiny),
            )
        )
    return bars + host_bars("backward", tiny)


def host_bars(op: str, tiny: Sequence[Row]) -> list[Bar]:
    """Host time per call (1,000 calls synchronized once) at most PyTorch's, tiny rows."""
    timed = [r for r in tiny if r.get("kernel_host_us") and r.get("reference_host_us")]
    if not timed:
        return []
    ok = [r for r in timed if r["kernel_host_us"] <= r["reference_host_us"]]
    worst = max(r["kernel_host_us"] / r["reference_host_us"] for r in timed)
    return [
        Bar(
            f"{op}, tiny: host time per call <= PyTorch's",
            f"{len(ok)} of {len(timed)}; worst {worst:.2f} x",
            len(ok) == len(timed),
        )
    ]


def reach_bar(op: str, ratios: Sequence[float]) -> Bar:
    """Every large row of `op` within 1.25 x its reach (`ratios`: ours over the mover's)."""
    within = sum(1 for x in ratios if x <= 1.25)
    return Bar(
        f"{op}, large: every row <= 1.25 x the mover",
        f"{within} of {len(ratios)}; worst {max(ratios):.2f} x",
        within == len(ratios),
    )


def reach_bars(bounds: dict[str, Any]) -> list[Bar]:
    """The reach bar of each operator in `tools.bar_bounds --json` (the harness's zero flush)."""
    bars: list[Bar] = []
    for op in sorted({r["op"] for r in bounds["rows"]}):
        rows = [r for r in bounds["rows"] if r["op"] == op and r["flush"] == "zero"]
        if rows:
            bars.append(reach_bar(op, [r["ours_us"] / r["mover_us"] for r in rows]))
    return bars


def benchmark_reach_bars(doc: dict[str, Any]) -> list[Bar]:
    """The reach bar from a benchmark run with `--reach` (its large rows' `reach_ms`)."""
    rows = [r for r in _rows(doc, LARGE) if r.get("reach_ms")]
    return [reach_bar(doc["op"], [r["kernel_ms"] / r["reach_ms"] for r in rows])] if rows else []


def verdict_bars(runs: Sequence[str]) -> list[Bar]:
    """Claim to verdict of `ondemand run` results: the first fresh (<= 90 s), the rest warm
    (<= 30 s), each succeeded."""
    from tools.verdict_times import row
    from workflows.models import JobResult

    bars: list[Bar] = []
    for i, item in enumerate(runs):
        name, _, path = item.partition("=")
        result = JobResult.model_validate_json(Path(path).read_text())
        _, seconds, _ = row(name, result)
        limit = 90.0 if i == 0 else 30.0
        ok = seconds <= limit and result.status.value == "succeeded"
        bars.append(Bar(f"verdict time, {name}: <= {limit:.0f} s", f"{seconds:.1f} s", ok))
    return bars


def forward_bars(doc: dict[str, Any]) -> list[Bar]:
    large = _rows(doc, LARGE)
    if not large:
        return []
    slower = [r for r in large if r["speedup"] < 1.0]
    bars = [
        Bar(
            "forward, large: no row slower than PyTorch",
            f"{len(slower)} of {len(large)} slower",
            not slower,
        )
    ]
    return bars + host_bars("forward", _rows(doc, TINY))


def vendor_bar(generic: dict[str, Any], mthreads: dict[str, Any]) -> list[Bar]:
    """The Moore Threads implementation within 5% of the generic on every row both timed (it
    applies to every size: its own kernels where windows divide, the generic scatters
    elsewhere)."""
    key = lambda r: (r["dtype"], tuple(r["size"]), tuple(r.get("output_size") or ()))  # noqa: E731
    gen = {key(r): r for r in generic["rows"]}
    ratios = [r["kernel_ms"] / gen[key(r)]["kernel_ms"] for r in mthreads["rows"] if key(r) in gen]
    if not ratios:
        return []
    within = sum(1 for x in ratios if x <= 1.05)
    return [
        Bar(
            "mthreads within 5% of generic, every row",
            f"{within} of {len(ratios)}; worst {max(ratios):.3f} x",
            within == len(ratios),
        )
    ]


def do_bench_bar(probe: dict[str, Any]) -> list[Bar]:
    """Every tiny backward row >= 1.5x PyTorch under Triton's own `do_bench` (its defaults),
    the median over the probe's repeats (`tools.host_probe --do-bench N --json`)."""
    rows = [r for r in probe.get("do_bench", []) if r["op"] == "backward"]
    if not rows:
        return []
    fast = [r for r in rows if r["speedup_median"] >= 1.5]
    worst = min(r["speedup_median"] for r in rows)
    return [
        Bar(
            f"backward, tiny: every row >= 1.5x under do_bench ({rows[0]['repeats']} runs)",
            f"{len(fast)} of {len(rows)}; worst {worst:.2f} x",
            len(fast) == len(rows),
        )
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bars", description=__doc__)
    parser.add_argument("--backward", type=Path, help="harness JSON of the backward")
    parser.add_argument("--forward", type=Path, help="harness JSON of the forward")
    parser.add_argument("--generic", type=Path, help="backward JSON with --impl generic")
    parser.add_argument("--mthreads", type=Path, help="backward JSON with --impl mthreads")
    parser.add_argument("--bounds", type=Path, help="tools.bar_bounds --json: the movers")
    parser.add_argument("--runs", nargs="+", default=[], help="NAME=PATH of ondemand run --json")
    parser.add_argument("--do-bench", type=Path, help="tools.host_probe --json: do_bench rows")
    args = parser.parse_args(argv)
    load = lambda p: json.loads(p.read_text())  # noqa: E731
    bars: list[Bar] = []
    if args.backward:
        bars += backward_bars(load(args.backward))
    if args.forward:
        bars += forward_bars(load(args.forward))
    if args.bounds:
        bars += reach_bars(load(args.bounds))
    else:  # benchmark runs with --reach carry it themselves
        for path in (args.backward, args.forward):
            bars += benchmark_reach_bars(load(path)) if path else []
    if args.generic and args.mthreads:
        bars += vendor_bar(load(args.generic), load(args.mthreads))
    if args.do_bench:
        bars += do_bench_bar(load(args.do_bench))
    bars += verdict_bars(args.runs)
    if not bars:
        parser.error("no file given holds rows a bar is about")
    width = max(len(b.name) for b in bars)
    print(f"{'bar':<{width}}  {'measured':<22} met")
    for b in bars:
        print(f"{b.name:<{width}}  {b.measured:<22} {'yes' if b.met else 'NO'}")
    return 0 if all(b.met for b in bars) else 1


if __name__ == "__main__":
    sys.exit(main())
