"""The tiny backward rows under `do_bench`'s loop in each launch-parity state, with the reach.

Triton's `do_bench` times, run after run, a 256 MB flush, a start event, the op and an end
event, so a one-kernel op keeps for the whole call the launch-parity state that the launches
before the call left (docs/notes/kernel-performance-journal.md, v10 and v13). This probe runs
that loop with the state set by hand: each timing follows one extra empty launch, so that
successive timings of a one-kernel op alternate states. For each tiny row it times PyTorch's
op, ours, the row's mover (the fastest of a few one-launch layouts that only move the row's
bytes: what any one-launch kernel takes) and an empty launch, in both states, and says
whether 1.5x PyTorch is within the mover's reach in the slower one.
`python3 -m tools.dobench_states [--runs 200] [--json out.json]` on a CUDA host.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import torch

from kernels.benchmark.bandwidth import backward_split
from kernels.benchmark.reach import MoverConfig, mover
from kernels.ops import adaptive_max_pool3d_backward as backward_op
from tools.host_probe import BWD, empty_kernel, tiny_cases

LAYOUTS = tuple(MoverConfig(block, warps, False) for block in (256, 512, 1024) for warps in (1, 4))
BAR = 1.5


class Loop:
    """do_bench's measured loop (flush, start event, op, end event; the mean), with an empty
    launch before each timing so that the launch parity flips between timings."""

    def __init__(self, runs: int) -> None:
        self.runs = runs
        self.cache = torch.empty(256 * 1024 * 1024 // 4, dtype=torch.int32, device="cuda")
        self.starts = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
        self.ends = [torch.cuda.Event(enable_timing=True) for _ in range(runs)]
        self.dummy = torch.empty(1, device="cuda")
        empty_kernel[(1,)](self.dummy)

    def __call__(self, fn: Callable[[], Any]) -> float:
        empty_kernel[(1,)](self.dummy)
        for start, end in zip(self.starts, self.ends, strict=True):
            self.cache.zero_()
            start.record()
            fn()
            end.record()
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) for s, e in zip(self.starts, self.ends, strict=True)]
        return statistics.fmean(times) * 1e3

    def states(self, fn: Callable[[], Any], timings: int = 6) -> tuple[float, float]:
        """(fast, slow) µs: the medians of alternate timings, the lower first. A one-kernel
        op alternates states; an op of two kernels averages them in every timing."""
        fn()
        torch.cuda.synchronize()
        got = [self(fn) for _ in range(timings)]
        even, odd = statistics.median(got[0::2]), statistics.median(got[1::2])
        return min(even, odd), max(even, odd)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="runs a timing (do_bench: ~100 ms)")
    parser.add_argument("--json", type=Path, help="write the rows here")
    args = parser.parse_args()
    loop = Loop(args.runs)
    dummy = loop.dummy
    empty = loop.states(lambda: empty_kernel[(1,)](dummy))
    print(f"empty launch: {empty[0]:.2f} / {empty[1]:.2f} µs (fast / slow state)")
    print(
        "\n| dtype | size | torch µs | torch/1.5 | ours fast | ours slow | mover fast | "
        "mover slow | mover layout | ours slow ≥ 1.5x | reach slow ≥ 1.5x |"
    )
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |")
    rows: list[dict[str, Any]] = []
    for dtype_name, shape, out, (x, idx, g) in tiny_cases():
        torch_us = statistics.fmean(loop.states(partial(BWD, g, x, idx)))
        ours = loop.states(partial(backward_op.adaptive_max_pool3d_backward, g, x, idx))
        split = backward_split(x.numel(), idx.numel(), x.element_size())
        movers = {cfg.name: loop.states(mover(split, cfg, "cuda")) for cfg in LAYOUTS}
        best = min(movers, key=lambda name: movers[name][1])
        need = torch_us / BAR
        row = {
            "dtype": dtype_name,
            "size": list(shape),
            "output_size": list(out),
            "torch_us": torch_us,
            "ours_us": list(ours),
            "mover_us": list(movers[best]),
            "mover_layout": best,
            "empty_us": list(empty),
        }
        rows.append(row)
        print(
            f"| {dtype_name} | {shape}→{out} | {torch_us:.2f} | {need:.2f} | {ours[0]:.2f} | "
            f"{ours[1]:.2f} | {movers[best][0]:.2f} | {movers[best][1]:.2f} | {best} | "
            f"{'yes' if ours[1] <= need else 'no'} | "
            f"{'yes' if movers[best][1] <= need else 'no'} |",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
