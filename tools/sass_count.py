"""Where a plan's instructions go, without a GPU: its kernel compiled here for sm_90 (H200).

    python -m tools.sass_count forward 8,64,16,56,56 7,7,7 float16
    python -m tools.sass_count forward 2,4,16,56,56 7,7,7 fp32 --config "column_max.Config(4, 2)"
    python -m tools.sass_count backward 4,32,32,64,64 10,20,20 float32

Plans as the H200's heuristics make them (`--config` overrides, as Python over the op's
kernel modules), compiled by this machine's Triton with its ptxas: static instructions a
thread, registers, the most frequent opcodes and, with `--sass PATH`, the listing. The GPU
image's Triton may be older, so counts move a little between the two; this shows where a
kernel spends its instructions (runtime divisions, a walk's loop body, spills), not its time.
To compile with the device's Triton instead, install its wheel beside this one (`pip install
--no-deps --target DIR triton==3.6.0`) and put DIR first on `PYTHONPATH`.
A two-launch plan (global pooling) prints each launch.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

os.environ.pop("TRITON_INTERPRET", None)  # compile, whatever the caller's process set

import torch
import triton
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.backends.nvidia.driver import CudaDriver
from triton.runtime import driver

TARGET = GPUTarget("cuda", 90, 32)
DTYPES = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64"}
DTYPES |= {name: name for name in tuple(DTYPES.values())}
BIN = Path(triton.backends.nvidia.__file__).parent / "bin"


class _NoDevice(CudaDriver):
    """Triton's CUDA driver as far as compiling goes: the target, device 0, stream 0."""

    def __init__(self) -> None:  # no libcuda to load
        pass

    def get_current_target(self) -> GPUTarget:
        return TARGET

    def get_current_device(self) -> int:
        return 0

    def get_current_stream(self, device: int | None = None) -> int:
        return 0


def _pretend_cuda() -> None:
    """kernels.runtime then plans for a CUDA device (it is imported after this)."""
    torch.cuda.is_available = lambda: True  # type: ignore[assignment]
    driver.set_active(_NoDevice())


def compile_launch(launch: Any, tensors: tuple[torch.Tensor, ...]) -> Any:
    """Compile a `kernels.launch.Launch` for TARGET: its kernel bound to these (meta) tensors
    and its scalars, as its first call would bind it, without launching."""
    seen: dict[str, Any] = {}

    def capture(**kwargs: Any) -> bool:
        seen.update(kwargs["compile"])
        return True  # Triton then skips its own compile

    before = knobs.runtime.jit_cache_hook
    knobs.runtime.jit_cache_hook = capture
    try:
        launch.kernel.warmup(*tensors, *launch.scalars, grid=launch.grid, **launch.constants)
    finally:
        knobs.runtime.jit_cache_hook = before
    source = triton.compiler.ASTSource(
        launch.kernel, seen["signature"], seen["constants"], seen["configs"][0]
    )
    options = {k: seen[k] for k in ("num_warps", "num_ctas", "num_stages", "enable_fp_fusion")}
    return triton.compile(source, target=TARGET, options=options)


def sass(compiled: Any) -> tuple[list[str], int | None]:
    """The kernel's SASS instruction lines and its registers a thread."""
    with tempfile.NamedTemporaryFile(suffix=".cubin") as cubin:
        cubin.write(compiled.asm["cubin"])
        cubin.flush()
        listing = subprocess.run(
            [str(BIN / "nvdisasm"), "-c", cubin.name], capture_output=True, text=True, check=True
        ).stdout
        usage = subprocess.run(
            [str(BIN / "cuobjdump"), "-res-usage", cubin.name],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    lines = [line for line in listing.splitlines() if re.match(r"\s+/\*[0-9a-f]{4}\*/", line)]
    registers = re.search(r"REG:(\d+)", usage)
    return lines, int(registers.group(1)) if registers else None


def opcode(line: str) -> str:
    """'  /*0e20*/  @P0 LDG.E.64 R28, ...' -> 'LDG'."""
    body = re.sub(r"^\s*/\*[0-9a-f]+\*/\s*(@!?U?P\w+\s+)?", "", line)
    return body.split()[0].split(".")[0].rstrip(";")


def recorded(plan: Any, tensors: tuple[torch.Tensor, ...]) -> list[tuple[Any, tuple[Any, ...]]]:
    """Each `Launch` the plan makes when called on `tensors`, with the tensors it passes (a
    plan of two launches allocates its scratch buffer on the meta device as it would on a
    GPU); nothing is launched."""
    from kernels.launch import Launch

    if isinstance(plan, Launch):
        return [(plan, tensors)]
    calls: list[tuple[Any, tuple[Any, ...]]] = []
    for name, value in list(vars(plan).items()):
        if isinstance(value, Launch):
            setattr(plan, name, lambda *passed, launch=value: calls.append((launch, passed)))
    plan(*tensors)
    return calls


def launches(
    op: str,
    shape: tuple[int, ...],
    out: tuple[int, int, int],
    dtype: torch.dtype,
    config: str | None,
) -> list[tuple[Any, tuple[Any, ...]]]:
    """The plan's launches for `op` on meta tensors, each with the tensors it takes first
    (`config` is evaluated over the op's package: this is a lab tool, not a service)."""
    from kernels.backends._nvidia.heuristics import for_device

    h200 = for_device(SimpleNamespace(multi_processor_count=132))
    x = torch.empty(shape, dtype=dtype, device="meta")
    pooled = torch.empty((*shape[:2], *out), dtype=dtype, device="meta")
    indices = torch.empty(pooled.shape, dtype=torch.int64, device="meta")
    if op == "forward":
        from kernels.ops import adaptive_max_pool3d as forward

        cfg = eval(config, vars(forward)) if config else None
        return recorded(forward.launch_for(x, out, cfg, h200), (x, pooled, indices))
    from kernels.ops import adaptive_max_pool3d_backward as backward

    cfg = eval(config, vars(backward)) if config else None
    p = backward.problem(pooled, x, indices)
    return recorded(backward.launch_for(p, cfg, h200), (p.grad, p.idx, p.gin))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("op", choices=("forward", "backward"))
    parser.add_argument("shape", help="N,C,D,H,W")
    parser.add_argument("output_size", help="OD,OH,OW")
    parser.add_argument(
        "dtype", type=lambda t: DTYPES.get(t, t), choices=sorted(set(DTYPES.values()))
    )
    parser.add_argument(
        "--config",
        action="append",
        help='e.g. "column_max.Config(4, 2, True)"; again to compare plans in one run',
    )
    parser.add_argument("--sass", type=Path, help="write the listing here")
    parser.add_argument("--top", type=int, default=12, help="opcodes to list")
    args = parser.parse_args(argv)
    _pretend_cuda()
    shape = tuple(int(v) for v in args.shape.split(","))
    out = tuple(int(v) for v in args.output_size.split(","))
    if len(shape) != 5 or len(out) != 3:
        parser.error("shape is N,C,D,H,W and output_size OD,OH,OW")
    listings = []
    configs = args.config or [None]
    for config in configs:
        if len(configs) > 1:
            print(f"config {config}:")
        for launch, tensors in launches(
            args.op, shape, (out[0], out[1], out[2]), getattr(torch, args.dtype), config
        ):
            lines, registers = sass(compile_launch(launch, tensors))
            counts = collections.Counter(opcode(line) for line in lines)
            name = launch.kernel.fn.__name__
            top = " ".join(f"{k} {v}" for k, v in counts.most_common(args.top))
            print(f"{name}: {len(lines)} instructions, {registers} registers a thread")
            print(f"  {top}")
            listings.append(f"// {name}\n" + "\n".join(lines))
    if args.sass:
        args.sass.write_text("\n\n".join(listings) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
