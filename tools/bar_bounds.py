"""How far the performance bars are within any kernel's reach, measured on a GPU.

For every large row of both operators, times PyTorch's operator, ours and the fastest
one-launch mover of the row's minimum traffic (`kernels.benchmark.reach`: it only reads
and writes those bytes), with the harness's timer (`DeviceTimer`, the 1 GiB zero flush) and again
with a read flush that leaves L2 clean. A mover is what a perfect kernel for the row would take:
PyTorch's time over it is the most speedup any kernel can show, its time over the floor the
least multiple of the floor. Prints, per operator and flush, a Markdown table in µs, then each
bar's measured value beside its reach; `--json PATH` keeps every number.

    source tools/gpu_env.sh && python3 -m tools.bar_bounds --json "$OUT/bounds.json"

Sanity rows first: the mover against PyTorch's own 1 GiB copy (the floor's bandwidth), and a
32 MiB copy with either flush and none (a flush that did not evict would show warm-L2 times).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from kernels.benchmark.bandwidth import (
    COPY_BYTES,
    Split,
    backward_split,
    copy_bandwidth_gbps,
    forward_split,
    pool3d_traffic_bytes,
)
from kernels.benchmark.definition import Case, load
from kernels.benchmark.harness import DeviceTimer, Flush
from kernels.benchmark.implementations import device_name, select
from kernels.benchmark.reach import fastest
from kernels.benchmark.sizes import DEFAULT_DTYPES, LARGE
from tools.bars import geomean

DEVICE = "cuda"
FLUSHES: tuple[Flush, ...] = ("zero", "read")
SPLITS = {"adaptive_max_pool3d_backward": backward_split, "adaptive_max_pool3d": forward_split}
# The bars on the large rows: (geometric mean speedup at least, median × floor at most).
BARS = {"adaptive_max_pool3d_backward": (2.0, 1.25), "adaptive_max_pool3d": (3.0, 1.5)}


def timer(flush: Flush) -> DeviceTimer:
    return DeviceTimer(warmup_ms=10, rep_ms=40, flush=flush)


@dataclass
class Measured:
    op: str
    dtype: str
    size: list[int]
    output_size: list[int]
    flush: str
    floor_us: float
    torch_us: float
    ours_us: float
    mover_us: float
    mover_config: str


def best_mover(split: Split, flush: Flush) -> tuple[float, str]:
    """The fastest mover layout's median (µs) and its name: the row's reach."""
    ms, name = fastest(split, DEVICE, timer(flush))
    return ms * 1e3, name


def sanity(copy_gbps: float) -> None:
    half = COPY_BYTES // 2
    print(f"copy bandwidth (PyTorch copy_ of {COPY_BYTES >> 20} MiB, zero flush): "
          f"{copy_gbps:.0f} GB/s")  # fmt: skip
    us, name = best_mover(Split(half, half), "zero")
    print(f"mover, {half >> 20} MiB read + written, zero flush: {2 * half / us / 1e3:.0f} GB/s "
          f"({name})")  # fmt: skip
    small = Split(16 << 20, 16 << 20)
    cells = []
    for flush in ("zero", "read", "none"):
        us, _ = best_mover(small, flush)
        cells.append(f"{flush} {us:.1f} µs")
    print("mover, 16 MiB read + 16 MiB written: " + ", ".join(cells) + "\n", flush=True)


def measure(op: str, copy_gbps: float, flushes: list[Flush]) -> list[Measured]:
    bench = load(op)
    kernel_fn, _ = select(op, "generic")
    out: list[Measured] = []
    for dtype in DEFAULT_DTYPES:
        for shape, output_size in LARGE:
            case = Case(dtype, shape, output_size)
            prepared = bench.prepare(case, DEVICE, kernel_fn)
            prepared.verify()
            inputs, outputs = math.prod(shape), math.prod(shape[:2]) * math.prod(output_size)
            size = case.torch_dtype.itemsize
            split = SPLITS[op](inputs, outputs, size)
            floor_us = pool3d_traffic_bytes(inputs, outputs, size) / copy_gbps / 1e3
            for flush in flushes:
                mover_us, config = best_mover(split, flush)
                out.append(
                    Measured(
                        op, dtype, list(shape), list(output_size), flush, floor_us,
                        timer(flush)(prepared.reference) * 1e3,
                        timer(flush)(prepared.kernel) * 1e3,
                        mover_us, config,
                    )
                )  # fmt: skip
            del prepared
    return out


def verdict(met: bool, reachable: bool) -> str:
    if met:
        return "met"
    return "not met, within reach" if reachable else "not met, out of reach"


def report(rows: list[Measured]) -> None:
    for op, (geo_bar, floor_bar) in BARS.items():
        for flush in FLUSHES:
            mine = [r for r in rows if r.op == op and r.flush == flush]
            if not mine:
                continue
            print(f"### {op}, {flush} flush (µs)\n")
            print("| dtype | size | floor | torch | ours | mover | mover ×F | torch/mover "
                  "| torch/ours | ours/mover |")  # fmt: skip
            print("| --- | --- |" + " ---: |" * 8)
            for r in mine:
                shape = ",".join(map(str, r.size)) + " → " + ",".join(map(str, r.output_size))
                print(f"| {r.dtype} | {shape} | {r.floor_us:.1f} | {r.torch_us:.1f} "
                      f"| {r.ours_us:.1f} | {r.mover_us:.1f} | {r.mover_us / r.floor_us:.2f} "
                      f"| {r.torch_us / r.mover_us:.2f} | {r.torch_us / r.ours_us:.2f} "
                      f"| {r.ours_us / r.mover_us:.2f} |")  # fmt: skip
            reach = geomean([r.torch_us / r.mover_us for r in mine])
            ours = geomean([r.torch_us / r.ours_us for r in mine])
            least = statistics.median(r.mover_us / r.floor_us for r in mine)
            median = statistics.median(r.ours_us / r.floor_us for r in mine)
            print(f"\ngeometric mean speedup: ours {ours:.3f}, reach {reach:.3f} "
                  f"(bar ≥ {geo_bar}: {verdict(ours >= geo_bar, reach >= geo_bar)})")  # fmt: skip
            print(f"median × floor: ours {median:.3f}, reach {least:.3f} (bar ≤ {floor_bar}: "
                  f"{verdict(median <= floor_bar, least <= floor_bar)})\n", flush=True)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write every measured row here")
    parser.add_argument("--ops", nargs="+", default=list(SPLITS), choices=list(SPLITS))
    parser.add_argument("--flushes", nargs="+", default=list(FLUSHES), choices=list(FLUSHES))
    args = parser.parse_args()
    copy_gbps = copy_bandwidth_gbps(DEVICE, timer("zero"))
    sanity(copy_gbps)
    rows: list[Measured] = []
    for op in args.ops:
        measured = measure(op, copy_gbps, args.flushes)
        report(measured)
        rows += measured
        if args.json:
            doc: dict[str, Any] = {
                "device": device_name(DEVICE),
                "torch": torch.__version__,
                "copy_gbps": copy_gbps,
                "rows": [asdict(r) for r in rows],
            }
            args.json.write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
