"""Where a fill_scatter row's time goes beyond its reach, by taking parts of the kernel away.

For each backward row (default: the benchmark's large rows whose windows overlap), times in
one process with the benchmark's timer (`DeviceTimer`, the 1 GiB zero flush):

- `ours`: the operator's plan;
- `no-dedup`: the same launch with no neighbour checked (every output stores its own gradient
  at its argmax; wrong where two windows chose one element): what the checks cost;
- `no-stores`: `no-dedup` with every index -1 (the same loads and zeros, no scattered store):
  what the scattered stores cost;
- `inbox-…`: the three above with every output a tile meets in one box (`fill_scatter.
  in_one_box`), where the default walks boxes and one box can hold the neighbours;
- `zeros`: only the plan's zeros, in its tiles and steps (`_zero_tile`, the same grid and
  warps), and `zeros-full` the same tiles in steps of a whole run of a tile's rows (at most
  4096 elements);
- `torch-zero`: PyTorch's `zero_` of the gradient;
- `mover`: the row's reach (`kernels.benchmark.reach.fastest`), and `write-mover` the fastest
  mover of the gradient's bytes alone (no reads): any zeros' floor.

A lab probe: `source tools/gpu_env.sh && python3 -m tools.scatter_bounds` (add `--case
N,C,D,H,W:OD,OH,OW` to choose rows). Prints a table in µs and each over the mover.
"""

from __future__ import annotations

# kernels first: on a CPU it sets TRITON_INTERPRET, which Triton reads when it is imported.
import kernels  # noqa: F401

# isort: split
import argparse
import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl

from kernels.benchmark.bandwidth import Split, backward_split
from kernels.benchmark.harness import DeviceTimer
from kernels.benchmark.reach import fastest
from kernels.heuristics import current
from kernels.launch import Launch
from kernels.ops._adaptive import unflatten3
from kernels.ops.adaptive_max_pool3d_backward import fill_scatter as fs
from kernels.ops.adaptive_max_pool3d_backward import launch_for, problem, select

ROWS = (
    ((4, 32, 32, 64, 64), (10, 20, 20)),
    ((8, 64, 16, 56, 56), (5, 9, 11)),
    ((8, 64, 16, 56, 56), (7, 7, 7)),
)
DTYPES = (torch.float16, torch.bfloat16, torch.float32)


@triton.jit
def zeros_kernel(
    gin_ptr, D, H, HW_vec, W_vec, n_d_tiles, n_h_tiles,
    TD: tl.constexpr, TH: tl.constexpr, ZB: tl.constexpr, VEC: tl.constexpr,
    SPLIT_H: tl.constexpr,
):  # fmt: skip
    """fill_scatter's zeros alone: the same tile a program, the same steps."""
    plane, dt, ht = unflatten3(tl.program_id(0), n_d_tiles, n_h_tiles)
    d0 = dt * TD
    d1 = tl.minimum(d0 + TD, D)
    h0 = ht * TH
    h1 = tl.minimum(h0 + TH, H)
    gin_plane = gin_ptr + plane.to(tl.int64) * D * HW_vec * VEC
    fs._zero_tile(gin_plane, d0, d1, h0, h1, HW_vec, W_vec, ZB, VEC, SPLIT_H)


def zeros_only(launch: Launch, zero_block: int | None = None) -> Launch:
    """A launch of `zeros_kernel` over `launch`'s (a fill_scatter launch's) tiles."""
    s, k = launch.scalars, launch.constants
    _, _, d, h, _, _, _, _, _, hw_vec, w_vec, _, _, n_d, n_h = s  # fill_scatter.plan's order
    constants = {
        "TD": k["TD"],
        "TH": k["TH"],
        "ZB": zero_block or k["ZB"],
        "VEC": k["VEC"],
        "SPLIT_H": k["SPLIT_H"],
        "num_warps": k["num_warps"],
    }
    return Launch(zeros_kernel, launch.grid, (d, h, hw_vec, w_vec, n_d, n_h), constants)


def variants(grad: torch.Tensor, x: torch.Tensor, idx: torch.Tensor) -> dict[str, Any]:
    """Callables of each part, over one gradient buffer."""
    p = problem(grad, x, idx)
    gin = p.gin
    route, cfg = select(p)
    launch = launch_for(p)
    parts: dict[str, Callable[[], Any]] = {
        "ours": lambda: launch(p.grad, p.idx, gin),
        "torch-zero": gin.zero_,
    }
    if route.name == "fill_scatter":
        plans = {"": launch}
        if fs.pairs_overlap(p) and not cfg.in_box:
            plans["inbox-"] = fs.plan(p, fs.in_one_box(p, cfg), current())
        nobody = torch.full_like(p.idx, -1)  # the same loads, no output's argmax in any tile
        alone = {"CD": 1, "CH": 1, "CW": 1}
        for prefix, made in plans.items():
            bare = Launch(made.kernel, made.grid, made.scalars, made.constants | alone)
            if prefix:
                parts[f"{prefix}ours"] = functools.partial(made, p.grad, p.idx, gin)
            parts[f"{prefix}no-dedup"] = functools.partial(bare, p.grad, p.idx, gin)
            parts[f"{prefix}no-stores"] = functools.partial(bare, p.grad, nobody, gin)
        zeros = zeros_only(launch)
        parts["zeros"] = lambda: zeros(gin)
        td, th = fs.sides(p, cfg.tile, cfg.rows)
        _, h, w = p.in_dhw
        run = th * w if th < h else td * h * w  # one store run of a tile
        full = zeros_only(launch, min(triton.next_power_of_2(run), 4096))
        parts["zeros-full"] = lambda: full(gin)
    return {"route": f"{route.name} {dataclasses.astuple(cfg)}", "parts": parts, "p": p}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", default=[], help="N,C,D,H,W:OD,OH,OW")
    parser.add_argument("--dtype", action="append", default=[], help="float16, bfloat16, float32")
    args = parser.parse_args(argv)
    rows = [
        tuple(tuple(int(v) for v in side.split(",")) for side in case.split(":"))
        for case in args.case
    ] or list(ROWS)
    timer = DeviceTimer(warmup_ms=10, rep_ms=60)
    torch.manual_seed(0)
    table = []
    dtypes = [getattr(torch, name) for name in args.dtype] or list(DTYPES)
    for shape, out in rows:
        for dtype in dtypes:
            x = torch.randn(shape, dtype=dtype, device="cuda")
            _, idx = torch.ops.aten.adaptive_max_pool3d(x, list(out))
            grad = torch.randn(idx.shape, dtype=dtype, device="cuda")
            made = variants(grad, x, idx)
            parts = made["parts"]
            parts["ours"]()
            want = torch.ops.aten.adaptive_max_pool3d_backward(grad, x, idx)
            # PyTorch sums shared argmaxes in the dtype, ours in fp32: bf16 differs by its ulp.
            ok = torch.allclose(made["p"].gin.float(), want.float(), rtol=2e-2, atol=2e-2)
            times = {name: timer(fn) * 1e3 for name, fn in parts.items()}
            split = backward_split(x.numel(), idx.numel(), x.element_size())
            times["mover"] = fastest(split, "cuda", timer)[0] * 1e3
            times["write-mover"] = fastest(Split(0, split.write_bytes), "cuda", timer)[0] * 1e3
            label = f"{str(dtype).removeprefix('torch.')} {shape}->{out}"
            table.append((label, made["route"], ok, times))
            print(label, made["route"], "correct" if ok else "WRONG", flush=True)
    names = ["ours", "no-dedup", "no-stores", "inbox-ours", "inbox-no-dedup", "inbox-no-stores"]
    names += ["zeros", "zeros-full", "torch-zero", "write-mover", "mover"]
    print("\n| row | " + " | ".join(names) + " | ours/mover | no-dedup/mover | zeros/mover |")
    print("|---|" + "---:|" * (len(names) + 3))
    for label, _, _, t in table:
        mover = t["mover"]
        cells = [f"{t[n]:.2f}" if n in t else "—" for n in names]
        ratios = [f"{t[n] / mover:.3f}" if n in t else "—" for n in ("ours", "no-dedup", "zeros")]
        print(f"| {label} | " + " | ".join(cells + ratios) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
