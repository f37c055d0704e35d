"""Tile sweep of the adaptive_max_pool3d kernels on a GPU: `python -m tools.tuning --out DIR`.

For each benchmark size and dtype it times PyTorch's operator, the default plan and a few
alternatives (the benchmark harness's device timer: median, L2 flushed between runs), checks
each variant's result once, and prints time over the memory floor (input·e + output·(e+8)
bytes at the measured copy bandwidth). A variant is named after its kernel (the names of the
dispatch tables, `kernels/ops/<op>/__init__.py`) and its tiles, e.g. `column_max/8-w4-d`;
it informs the device's heuristics (`kernels/backends/_nvidia/heuristics.py`); the benchmark
harness (`python -m kernels.benchmark`) gives the report.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import math
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from kernels import runtime
from kernels.benchmark.bandwidth import (
    backward_split,
    copy_bandwidth_gbps,
    forward_split,
    pool3d_traffic_bytes,
)
from kernels.benchmark.harness import DeviceTimer
from kernels.benchmark.reach import fastest
from kernels.benchmark.sizes import LARGE, TINY
from kernels.heuristics import Heuristics, current
from kernels.ops._adaptive import Backward, Forward
from kernels.ops.adaptive_max_pool3d import (
    adaptive_max_pool3d,
    chunked,
    column_max,
    global_groups,
    global_split,
    lane_window,
    pair_window,
    window_tile,
)
from kernels.ops.adaptive_max_pool3d_backward import (
    adaptive_max_pool3d_backward,
    disjoint,
    fill_scatter,
    problem,
    rows,
    scatters,
    small_input,
    zeroed_scatter,
)

DTYPES = (torch.float16, torch.bfloat16, torch.float32)
TINY_SHAPES = {shape for shape, _ in TINY}


_TIMER = DeviceTimer(warmup_ms=10, rep_ms=40)
GROUP_TILES = (
    (8, 256, 4),
    (16, 256, 4),
    (32, 256, 8),
    (64, 256, 8),
    (16, 512, 8),
    (8, 1024, 8),
    (4, 2048, 8),
    (32, 128, 4),
    (128, 256, 8),
    (32, 256, 4),
    (16, 1024, 8),
)


def bench(fn: Callable[[], Any]) -> float:
    """Median milliseconds of `fn`, L2 flushed between runs (the harness's timer)."""
    return _TIMER(fn)


def floor_ms(in_numel: int, out_numel: int, element: int, gbps: float) -> float:
    """The memory floor: the minimum traffic at the copy bandwidth."""
    return pool3d_traffic_bytes(in_numel, out_numel, element) / gbps / 1e6


def forward_variants(
    shape: tuple[int, ...], out: tuple[int, int, int], h: Heuristics | None = None
) -> dict[str, Any]:
    """The default plan (None) and the alternatives worth timing for this shape (fp16 layout:
    contiguous), each named `kernel/tiles`."""
    h = h or current()
    p = Forward.of(torch.empty(shape, dtype=torch.float16, device="meta"), out)
    windows = p.windows
    variants: dict[str, Any] = {"default": None}
    # "window_tile/Nk-wM": about N·1024 elements a load, M warps; only where its loads
    # vectorize (the dispatch table's own rule).
    if window_tile.vectorizes(p):
        for tile in (1024, 2048, 4096):
            sides = window_tile.tiles(windows, out, tile, pack_rows=False)
            for warps in (1, 2, 4):
                variants[f"window_tile/{tile // 1024}k-w{warps}"] = dataclasses.replace(
                    sides, num_warps=warps
                )
    small = p.elements <= h.small_window
    tiny = shape in TINY_SHAPES
    pairs = small and pair_window.fits(p)
    if pairs:  # "pair_window/N": N outputs a program
        for tile in (64, 128, 256, 512, 1024) if tiny else (256, 1024):
            variants[f"pair_window/{tile}"] = pair_window.tiles(out[1], out[2], tile, False)
    if small and (tiny or not pairs):  # "lane_window/N-wM"
        for block, warps in ((128, 4), (256, 4), (256, 8), (512, 8)):
            variants[f"lane_window/{block}-w{warps}"] = lane_window.Config(block, warps)
    if small and column_max.fits(p):
        # "column_max/N-wM": N output rows a program; "-d" unrolls the depth walk too
        for rows_, warps in ((4, 2), (4, 4), (8, 2), (8, 4), (16, 4), (16, 8), (32, 8)):
            variants[f"column_max/{rows_}-w{warps}"] = column_max.Config(rows_, warps)
            variants[f"column_max/{rows_}-w{warps}-d"] = column_max.Config(rows_, warps, True)
        for rows_, warps in ((1, 1), (2, 1), (2, 2), (4, 1), (4, 2), (4, 4), (8, 4)):
            # "-c": each (plane, oh) row's depth walked once, shared depths carried; "-cN" in
            # runs of N windows, a run a program
            for run in (0, 2, 3):
                name = f"column_max/{rows_}-w{warps}-c" + (str(run) if run else "")
                variants[name] = column_max.Config(rows_, warps, carry=True, run=run)
        # "...-2p": a walk above in two passes (column maxima, then their first steps)
        for name, cfg in [(k, v) for k, v in variants.items() if k.startswith("column_max/")]:
            if not cfg.carry:
                variants[f"{name}-2p"] = dataclasses.replace(cfg, two_pass=True)
    if not small:
        if global_split.fits(p):  # "global_split/pN-bB-wM": N parts a plane (0: the rule)
            for parts, block, warps in ((0, 1024, 4), (2, 1024, 4), (8, 1024, 4), (0, 2048, 8)):
                variants[f"global_split/p{parts}-b{block}-w{warps}"] = global_split.Config(
                    parts, block, warps
                )
        if global_groups.fits(p, 256):  # "global_groups/RxG-wM": R groups of G elements a program
            for rows_, group, warps in GROUP_TILES:
                variants[f"global_groups/{rows_}x{group}-w{warps}"] = global_groups.Config(
                    rows_, group, warps
                )
        base = chunked.default(p, h)
        variants["chunked/2048"] = base
        variants["chunked/4096"] = chunked.tiles(windows, out, 4096, pack_rows=False)
        variants["chunked/2048-w4"] = dataclasses.replace(base, num_warps=4)
    return variants


def backward_variants(p: Backward, h: Heuristics | None = None) -> dict[str, Any]:
    """The default plan (None) and the alternatives worth timing for this problem, each
    named `kernel/tiles`, the Moore Threads override as `mthreads` (in `sweep_backward`)."""
    h = h or current()
    shape = tuple(p.gin.shape)
    tiny = shape in TINY_SHAPES
    variants: dict[str, Any] = {"default": None}
    scatter = scatters(p, h)  # the scatters' static candidate loops stay small
    for tile in (4096, 8192, 16384, 32768):  # "fill_scatter/Nk": N·1024 elements a program
        if scatter and (not tiny or tile == 8192):
            variants[f"fill_scatter/{tile // 1024}k"] = fill_scatter.tiles(p, h, tile)
    if scatter and not tiny:
        base = fill_scatter.walked(p, h)
        if fill_scatter.default(p, h).in_box:  # "fill_scatter/walk": the default tiles walked
            variants["fill_scatter/walk"] = base
        for per_thread in (1, 2, 4):  # "fill_scatter/boxN": the default tiles, N outputs a walk
            variants[f"fill_scatter/box{per_thread * 256}"] = dataclasses.replace(
                base, box=per_thread * 256
            )
        for warps in (2, 4, 8, 16):  # "fill_scatter/wN": the default tiles, N warps
            if warps != base.num_warps:
                variants[f"fill_scatter/w{warps}"] = dataclasses.replace(base, num_warps=warps)
        for block in (512, 1024, 2048, 4096):  # "fill_scatter/zN": ... N zeros a store step
            if block != base.zero_block:
                variants[f"fill_scatter/z{block}"] = dataclasses.replace(base, zero_block=block)
        for tile in (16384, 32768):  # "fill_scatter/Nk-hR": R rows of as many slices as fit
            for rows_ in (8, 16):
                variants[f"fill_scatter/{tile // 1024}k-h{rows_}"] = fill_scatter.tiles(
                    p, h, tile, rows_
                )
        plane = fill_scatter.tiles(p, h, math.prod(p.in_dhw))  # a program a (n, c) plane
        variants["fill_scatter/plane"] = plane
        for per_thread in (1, 2, 4):  # ... walking N outputs at a time
            variants[f"fill_scatter/plane-box{per_thread * 256}"] = dataclasses.replace(
                plane, box=per_thread * 256
            )
        if fill_scatter.pairs_overlap(p):  # "fill_scatter/inbox[-wN]": the default tiles, one box
            # holding every output a tile meets, neighbours gathered from it (N warps);
            # "fill_scatter/<tiles>-inbox": the tile variants above so
            tiled = {"inbox": base} | {
                f"{name.removeprefix('fill_scatter/')}-inbox": cfg
                for name, cfg in variants.items()
                if re.fullmatch(r"fill_scatter/(\d+k(-h\d+)?|plane)", name)
            }
            for name, cfg in tiled.items():
                boxed = fill_scatter.in_one_box(p, cfg)
                if boxed.box > 4096:
                    continue
                for warps in (4, 8, 16) if name == "inbox" else (cfg.num_warps,):
                    suffix = "" if warps == cfg.num_warps else f"-w{warps}"
                    variants[f"fill_scatter/{name}{suffix}"] = dataclasses.replace(
                        boxed, num_warps=warps
                    )
    for block in (256, 512, 1024):  # "zeroed_scatter/N": N outputs a program
        if scatter and (not tiny or block == 512):
            variants[f"zeroed_scatter/{block}"] = zeroed_scatter.tiles(block)
    if disjoint.fits(p):
        variants["disjoint"] = disjoint.default(p, h)
        if not tiny:  # "disjoint/Nk-wM": about N·1024 elements a program, M warps
            for tile in (2048, 4096, 8192):
                sides = disjoint.default(p, dataclasses.replace(h, backward_elements=tile))
                for warps in (4, 8):
                    variants[f"disjoint/{tile // 1024}k-w{warps}"] = dataclasses.replace(
                        sides, num_warps=warps
                    )
    if small_input.fits(p):
        variants["small_input"] = small_input.default(p, h)
        if tiny:  # "small_input/bN-wM": N elements a program, M warps
            for block in (256, 512, 1024, 2048):
                for warps in (1, 2, 4, 8):
                    if block >= 32 * warps:
                        variants[f"small_input/b{block}-w{warps}"] = small_input.Config(
                            block, warps
                        )
    variants["rows"] = rows.default(p, h)
    return variants


def timed(name: str, only: str | None) -> bool:
    """Whether a sweep times variant `name`: the default always, the rest where `only` (a
    regex on variant names) matches or is not given."""
    return not only or name == "default" or re.search(only, name) is not None


def report(op: str, label: str, floor: float, times: dict[str, float]) -> None:
    """One line: every variant's time over the floor, the best, and speedups over PyTorch
    (and over the row's reach where it was timed)."""
    ours = {k: v for k, v in times.items() if k not in ("torch", "reach")}
    best_name = min(ours, key=lambda k: ours[k])
    ratios = " ".join(f"{k}={v / floor:.2f}" for k, v in ours.items())
    reach = times.get("reach")
    of_reach = (
        f" reach={reach / floor:.2f} best/reach {ours[best_name] / reach:.3f}"
        f" default/reach {ours['default'] / reach:.3f}"
        if reach
        else ""
    )
    print(
        f"{op} {label}: floor {floor * 1e3:.1f}us torch={times['torch'] / floor:.2f} {ratios}"
        f" | best {best_name} x{times['torch'] / ours[best_name]:.2f}"
        f" default x{times['torch'] / ours['default']:.2f}{of_reach}",
        flush=True,
    )


def sweep_backward(
    grad: torch.Tensor,
    x: torch.Tensor,
    idx: torch.Tensor,
    warm: bool = False,
    only: str | None = None,
) -> dict[str, float]:
    aten = torch.ops.aten.adaptive_max_pool3d_backward
    want = aten(grad, x, idx).float()
    times = {"torch": 0.0 if warm else bench(lambda: aten(grad, x, idx))}
    mthreads = runtime.function("adaptive_max_pool3d_backward", "mthreads")
    candidates: dict[str, Callable[[], Any]] = {"mthreads": lambda: mthreads(grad, x, idx)}
    for name, cfg in backward_variants(problem(grad, x, idx)).items():
        candidates[name] = functools.partial(adaptive_max_pool3d_backward, grad, x, idx, config=cfg)
    for name, fn in candidates.items():
        if not timed(name, only):
            continue
        # PyTorch adds overlapping gradients in bf16; we add in fp32: a bf16 ulp apart.
        tol = 3e-2 if x.dtype == torch.bfloat16 else 1e-2
        ok = torch.allclose(fn().float(), want, rtol=tol, atol=tol)
        times[name] = float("nan") if not ok else 0.0 if warm else bench(fn)
    return times


def sweep_forward(
    x: torch.Tensor, out: tuple[int, int, int], warm: bool = False, only: str | None = None
) -> dict[str, float]:
    want_out, want_idx = torch.ops.aten.adaptive_max_pool3d(x, list(out))
    aten = torch.ops.aten.adaptive_max_pool3d
    times = {"torch": 0.0 if warm else bench(lambda: aten(x, list(out)))}
    for name, cfg in forward_variants(tuple(x.shape), out).items():
        if not timed(name, only):
            continue
        fn = functools.partial(adaptive_max_pool3d, x, out, config=cfg)
        got_out, got_idx = fn()
        ok = torch.equal(got_idx, want_idx) and torch.equal(got_out, want_out)
        times[name] = float("nan") if not ok else 0.0 if warm else bench(fn)
    return times


def parse_case(text: str) -> tuple[tuple[int, ...], tuple[int, int, int]]:
    """'8,64,16,56,56:8,50,50' -> ((8, 64, 16, 56, 56), (8, 50, 50))."""
    try:
        shape_text, out_text = text.split(":")
        shape = tuple(int(v) for v in shape_text.split(","))
        out = tuple(int(v) for v in out_text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N,C,D,H,W:OD,OH,OW, got {text!r}") from None
    if len(shape) != 5 or len(out) != 3 or min(shape + out) < 1:
        raise argparse.ArgumentTypeError(f"expected N,C,D,H,W:OD,OH,OW, got {text!r}")
    return shape, (out[0], out[1], out[2])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--ops", default="backward,forward")
    parser.add_argument(
        "--warm", metavar="I/N", help="only compile (and check) shard I of N, for the cache"
    )
    parser.add_argument(
        "--only", metavar="REGEX", help="only the cases whose label matches, e.g. '10, 20, 20'"
    )
    parser.add_argument(
        "--reach", action="store_true", help="also time each row's mover (its reach)"
    )
    parser.add_argument(
        "--variants", metavar="REGEX", help="only the variants whose name matches (and default)"
    )
    parser.add_argument(
        "--case",
        action="append",
        type=parse_case,
        metavar="N,C,D,H,W:OD,OH,OW",
        help="sweep this shape instead of the benchmark sizes (repeatable)",
    )
    args = parser.parse_args(argv)
    shard, shards = (int(v) for v in args.warm.split("/")) if args.warm else (0, 1)
    if runtime.device == "cpu":
        print("needs a GPU", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    gbps = 1.0 if args.warm else copy_bandwidth_gbps(runtime.device, bench)
    print(f"copy bandwidth {gbps:.0f} GB/s", flush=True)
    rows: list[dict[str, Any]] = []
    sets = (("case", args.case),) if args.case else (("tiny", TINY), ("large", LARGE))
    plan = [
        (size_set, shape, out, dtype)
        for size_set, cases in sets
        for shape, out in cases
        for dtype in DTYPES
    ]
    if args.only:
        plan = [c for c in plan if re.search(args.only, f"{c[0]} {c[3]} {c[1]}->{c[2]}")]
    for number, (size_set, shape, out, dtype) in enumerate(plan):
        if number % shards != shard:
            continue
        torch.manual_seed(0)
        x = torch.randn(shape, dtype=dtype, device=runtime.device)
        _, idx = torch.ops.aten.adaptive_max_pool3d(x, list(out))
        grad = torch.randn(idx.shape, dtype=dtype, device=runtime.device)
        floor = floor_ms(x.numel(), idx.numel(), x.element_size(), gbps)
        label = f"{size_set} {dtype} {shape}->{out}"
        for op in args.ops.split(","):
            if op == "backward":
                times = sweep_backward(grad, x, idx, bool(args.warm), args.variants)
            else:
                times = sweep_forward(x, out, bool(args.warm), args.variants)
            if args.warm:
                bad = [k for k, v in times.items() if v != v]
                print(f"warm {op} {label}: {'WRONG ' + str(bad) if bad else 'ok'}", flush=True)
                continue
            if args.reach:
                split = (backward_split if op == "backward" else forward_split)(
                    x.numel(), idx.numel(), x.element_size()
                )
                times["reach"] = fastest(split, runtime.device, bench)[0]
            rows.append({"op": op, "case": label, "floor": floor, **times})
            report(op, label, floor, times)
    if args.warm:
        return 0
    (args.out / "tuning.json").write_text(json.dumps({"copy_bandwidth_gbps": gbps, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
