"""Host time per call on tiny inputs, ours against PyTorch's, and where ours goes, on a GPU.

Prints, for both operators on the tiny benchmark sizes and every dtype, the host time per
call (the benchmark's measure: 1,000 back-to-back calls synchronized once) of PyTorch's op and
ours, with the launch path our plan took; then the parts of one call, down to Triton's C launch
function alone and the forward's floor on the Python path (its two allocations and that
launch: what no Python around them can go under); then, with `--do-bench`,
both sides under Triton's standard `do_bench` (its defaults: mean of its runs, 256 MB flush),
repeated, the rows also as JSON for `tools.bars --do-bench`; with `--rounds N`, only the
forward's host time round by round (fp16 beside bf16). From the repository root:
`python3 -m tools.host_probe [--do-bench 5 [--json probe.json] | --rounds 15]`.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import torch
import triton

from kernels import native, runtime
from kernels.benchmark.harness import host_us_per_call
from kernels.benchmark.sizes import DEFAULT_DTYPES, DTYPES, TINY
from kernels.launch import Launch
from kernels.ops import adaptive_max_pool3d as forward_op
from kernels.ops import adaptive_max_pool3d_backward as backward_op
from kernels.ops._adaptive import allocator, backward_signature, signature

FWD = torch.ops.aten.adaptive_max_pool3d.default
BWD = torch.ops.aten.adaptive_max_pool3d_backward.default


def sync() -> None:
    torch.cuda.synchronize()


def us(fn: Callable[[], Any], calls: int = 1000) -> float:
    """The smallest of three host-time measurements (the host's noise only adds)."""
    return min(host_us_per_call(fn, sync, calls) for _ in range(3))


def tensors(shape: tuple[int, ...], out: tuple[int, int, int], dtype: torch.dtype) -> tuple:
    x = torch.randn(shape, dtype=dtype, device="cuda")
    _, idx = FWD(x, list(out))
    g = torch.randn(idx.shape, dtype=dtype, device="cuda")
    return x, idx, g


def tiny_cases() -> Iterator[tuple[str, tuple[int, ...], tuple[int, int, int], tuple]]:
    """(dtype name, shape, output size, (x, indices, grad)) of every tiny benchmark row."""
    for dtype_name in DEFAULT_DTYPES:
        for shape, out in TINY:
            yield dtype_name, shape, out, tensors(shape, out, DTYPES[dtype_name])


def plan_path(plans: Any) -> str:
    """How the newest plan's kernels launch now (`kernels.launch.Launch.path`)."""
    plan = list(plans._plans.values())[-1]
    return str(getattr(getattr(plan, "launch", None), "path", "?"))


def rows() -> None:
    """Host µs per call of every tiny row, both operators, PyTorch's and ours."""
    mthreads = runtime.function("adaptive_max_pool3d_backward", "mthreads")
    print("| op | dtype | size | torch µs | ours µs | ours/torch | path | mthreads µs |")
    print("| --- | --- | --- | ---: | ---: | ---: | --- | ---: |")
    for dtype_name, shape, out, (x, idx, g) in tiny_cases():
        ref = us(partial(FWD, x, list(out)))
        ours = us(partial(forward_op.adaptive_max_pool3d, x, out))
        path = plan_path(forward_op._PLANS)
        print(f"| fwd | {dtype_name} | {shape}→{out} | {ref:.1f} | {ours:.1f} | "
              f"{ours / ref:.2f} | {path} | |", flush=True)  # fmt: skip
        ref = us(partial(BWD, g, x, idx))
        ours = us(partial(backward_op.adaptive_max_pool3d_backward, g, x, idx))
        mt = us(partial(mthreads, g, x, idx))
        path = plan_path(backward_op._PLANS)
        print(f"| bwd | {dtype_name} | {shape}→{out} | {ref:.1f} | {ours:.1f} | "
              f"{ours / ref:.2f} | {path} | {mt:.1f} |", flush=True)  # fmt: skip


def c_launch_alone(launch: Launch, tensors: tuple[torch.Tensor, ...]) -> Callable[[], Any] | None:
    """Triton's C launch function with its whole argument tuple built once: what a lean call
    costs at the least (None where this launch is not lean)."""
    from kernels.launch import _lean_wrapper, _recorded_call

    if not isinstance(launch, Launch):
        return None
    compiled = launch.kernel[launch.grid](*tensors, *launch.scalars, **launch.constants)
    grid = (*launch.grid, 1, 1)[:3]
    tail = launch._tail
    wrapper = _lean_wrapper(compiled)
    recorded = (
        None if wrapper is None else _recorded_call(wrapper, compiled, grid, (*tensors, *tail))
    )
    if recorded is None:
        return None
    head, middle, spread = recorded
    ptrs = tuple(t.data_ptr() for t in tensors)
    stream = torch._C._cuda_getCurrentRawStream(torch._C._cuda_getDevice())
    args = (*head, stream, *middle, *((*ptrs, *tail) if spread else ((*ptrs, *tail),)))
    return partial(wrapper.launch, *args)


def forward_floor(
    x: torch.Tensor, values: torch.Tensor, launch: Callable[[], Any] | None
) -> Callable[[], Any] | None:
    """The least a forward call of this design costs on the host: its two outputs allocated as
    the plan allocates them, and the C launch with its arguments built once (no plan lookup,
    no checks, no Python between)."""
    if launch is None:
        return None
    new_values = allocator(values.shape, values.dtype, x.device)
    new_indices = allocator(values.shape, torch.int64, x.device)
    return lambda: (new_values(), new_indices(), launch())


def parts() -> None:
    """Where one call's host time goes (fp16, the second tiny size), both operators."""
    shape, out = TINY[1]
    x, idx, g = tensors(shape, out, torch.float16)
    p = backward_op.problem(g, x, idx)
    launch = backward_op.launch_for(p)
    launch(g, idx, p.gin)
    launch(g, idx, p.gin)
    jit = launch.kernel[launch.grid]
    device = x.device
    forward_op.adaptive_max_pool3d(x, out)
    fwd_plan = forward_op._PLANS.get((signature(x), out, None))
    values, positions = FWD(x, list(out))
    fwd_launch = fwd_plan.launch
    fwd_alone = c_launch_alone(fwd_launch, (x, values, positions))
    empty = Launch(empty_kernel, (1,), (), {})
    empty(x)
    empty(x)
    items: dict[str, Callable[[], Any] | None] = {
        "torch.empty(shape, dtype=, device=torch.device)": lambda: torch.empty(
            shape, dtype=x.dtype, device=device
        ),
        "torch.empty(shape, dtype=, device=int)": lambda: torch.empty(
            shape, dtype=x.dtype, device=0
        ),
        "torch.empty_like(x)": lambda: torch.empty_like(x),
        "x.new_empty(shape)": lambda: x.new_empty(shape),
        "allocator(shape, ...)()": allocator(shape, x.dtype, device),
        "backward_signature(g, x, idx)": lambda: backward_signature(g, x, idx),
        "x.device": lambda: x.device,
        "x.data_ptr()": lambda: x.data_ptr(),
        "x.stride()": lambda: x.stride(),
        "x.shape": lambda: x.shape,
        "hash(backward_signature)": lambda: hash(backward_signature(g, x, idx)),
        "forward plan lookup": lambda: forward_op._PLANS.get((signature(x), out, None)),
        "torch._C._cuda_getDevice()": lambda: torch._C._cuda_getDevice(),
        "raw stream": lambda: torch._C._cuda_getCurrentRawStream(0),
        "empty kernel, Launch": lambda: empty(x),
        "empty kernel, C launch alone": c_launch_alone(empty, (x,)),
        f"backward Launch ({launch.path})": lambda: launch(g, idx, p.gin),
        "backward C launch alone": c_launch_alone(launch, (g, idx, p.gin)),
        "backward kernel[grid](...)": lambda: jit(
            g, idx, p.gin, *launch.scalars, **launch.constants
        ),
        f"forward Launch ({fwd_launch.path})": lambda: fwd_launch(x, values, positions),
        "forward Launch's direct function": lambda: fwd_launch._direct(x, values, positions),
        "forward C launch alone": fwd_alone,
        "forward floor: two allocations and the C launch alone": forward_floor(
            x, values, fwd_alone
        ),
        "whole backward": lambda: backward_op.adaptive_max_pool3d_backward(g, x, idx),
        "whole forward": lambda: forward_op.adaptive_max_pool3d(x, out),
        "forward through the C++ helper's call alone": _native_call(x, out),
        "torch backward": lambda: BWD(g, x, idx),
        "torch forward": lambda: FWD(x, list(out)),
    }
    for name, fn in items.items():
        print(f"{name}: {'n/a' if fn is None else f'{us(fn, 2000):.2f} µs'}", flush=True)


def _native_call(x: torch.Tensor, out: tuple[int, int, int]) -> Callable[[], Any] | None:
    """The C++ helper's whole forward call (key, plan state, outputs, launch), where in use."""
    helper, states = native.host(), forward_op._PLANS.native
    if helper is None or helper.call(states, out, x) is None:
        return None
    return lambda: helper.call(states, out, x)


@triton.jit
def empty_kernel(x_ptr):
    """Does nothing: its time under a timer is a launch's fixed cost there."""
    pass


def do_bench(repeats: int) -> list[dict[str, Any]]:
    """Both operators' tiny rows under `triton.testing.do_bench` with its defaults, and the
    time of an empty Triton launch (one program) under it: the floor of any one-launch op."""
    from triton.testing import do_bench as bench

    x = torch.empty(1, device="cuda")
    empty_kernel[(1,)](x)
    empty = statistics.median(bench(lambda: empty_kernel[(1,)](x)) * 1e3 for _ in range(repeats))
    print(f"\nan empty Triton launch under do_bench: {empty:.2f} µs (median of {repeats})")

    print(f"\n| op | dtype | size | torch µs | ours µs | speedup (median of {repeats}) | min |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    found: list[dict[str, Any]] = []
    for dtype_name, shape, out, (x, idx, g) in tiny_cases():
        pairs = {
            "backward": (
                partial(BWD, g, x, idx),
                partial(backward_op.adaptive_max_pool3d_backward, g, x, idx),
            ),
            "forward": (
                partial(FWD, x, list(out)),
                partial(forward_op.adaptive_max_pool3d, x, out),
            ),
        }
        for op, (ref, ours) in pairs.items():
            times = [(bench(ref) * 1e3, bench(ours) * 1e3) for _ in range(repeats)]
            speedups = [r / o for r, o in times]
            found.append(
                {
                    "op": op,
                    "dtype": dtype_name,
                    "size": list(shape),
                    "output_size": list(out),
                    "repeats": repeats,
                    "torch_us": [r for r, _ in times],
                    "ours_us": [o for _, o in times],
                    "speedup_median": statistics.median(speedups),
                }
            )
            print(
                f"| {op} | {dtype_name} | {shape}→{out} | "
                f"{statistics.median(r for r, _ in times):.2f} | "
                f"{statistics.median(o for _, o in times):.2f} | "
                f"{statistics.median(speedups):.3f} | {min(speedups):.3f} |",
                flush=True,
            )
    return found


def rounds(count: int) -> None:
    """Each forward tiny row's host time, round by round: PyTorch's and ours in fp16 and bf16
    alternating `count` times (1,000 calls a round), and the garbage collections each side's
    rounds ran into, to tell a slow row from a slow stretch of the host."""
    collections = [0]
    gc.callbacks.append(lambda phase, info: collections.__setitem__(0, collections[0] + 1))
    print(f"\nforward host µs, {count} alternating rounds (least / median / most; gc runs)")
    for shape, out in TINY:
        sides: dict[str, Callable[[], Any]] = {}
        for name in ("float16", "bfloat16"):
            x = torch.randn(shape, dtype=DTYPES[name], device="cuda")
            sides[f"torch {name}"] = partial(FWD, x, list(out))
            sides[f"ours {name}"] = partial(forward_op.adaptive_max_pool3d, x, out)
        times: dict[str, list[float]] = {name: [] for name in sides}
        gcs = dict.fromkeys(sides, 0)
        for _ in range(count):
            for name, fn in sides.items():
                before = collections[0]
                times[name].append(host_us_per_call(fn, sync, 1000))
                gcs[name] += collections[0] - before
        for name, found in times.items():
            print(f"{shape}->{out} {name:>15}: {min(found):6.2f} / "
                  f"{statistics.median(found):6.2f} / {max(found):6.2f}; gc {gcs[name]}; "
                  + " ".join(f"{t:.1f}" for t in found), flush=True)  # fmt: skip


def alignment() -> None:
    """A plan made for aligned data must not run a misaligned view of the same shape."""
    base = torch.randn(2 * 8 * 8 * 9 + 1, dtype=torch.float16, device="cuda")
    for offset in (0, 1, 0, 1):
        x = base[offset : offset + 8 * 8 * 9].view(1, 1, 8, 8, 9)
        got = forward_op.adaptive_max_pool3d(x, (4, 4, 3))
        want = FWD(x, [4, 4, 3])
        ok = torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        g = torch.randn(want[0].shape, dtype=x.dtype, device="cuda")
        gbase = torch.randn(g.numel() + 1, dtype=x.dtype, device="cuda")
        gv = gbase[offset : offset + g.numel()].view(g.shape)
        gv.copy_(g)
        ok &= torch.equal(
            backward_op.adaptive_max_pool3d_backward(gv, x, want[1]), BWD(g, x, want[1])
        )
        print(f"alignment offset {offset}: {'ok' if ok else 'WRONG'}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--do-bench", type=int, default=0, help="do_bench repeats (0: none)")
    parser.add_argument("--rounds", type=int, default=0, help="forward host-time rounds")
    parser.add_argument("--json", type=Path, help="write the do_bench rows here (tools.bars)")
    args = parser.parse_args()
    print(f"torch {torch.__version__}, triton {triton.__version__}, {torch.cuda.get_device_name()}")
    started = time.perf_counter()
    native.host()
    took = time.perf_counter() - started
    print(f"C++ helper: {native.status()} ({took:.1f} s)", flush=True)
    if args.rounds:
        rounds(args.rounds)
        return
    alignment()
    rows()
    parts()
    if args.do_bench:
        found = do_bench(args.do_bench)
        if args.json:
            args.json.write_text(json.dumps({"do_bench": found}, indent=1))


if __name__ == "__main__":
    main()
