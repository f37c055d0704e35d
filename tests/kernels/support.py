"""Plain helpers of the kernel accuracy suite: the device, random data, references, comparisons.

The reference is PyTorch on the CPU in float64; inputs are made in the tested dtype first and
upcast (exactly) for the reference, so both see the same numbers.
"""

from __future__ import annotations

import importlib
import zlib
from types import ModuleType, SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from kernels import runtime
from kernels.backends._cpu.heuristics import INTERPRETER
from kernels.backends._nvidia.heuristics import for_device


def bot_module(name: str) -> ModuleType | None:
    """A module of the bot's own (the shared models, the runner's reader), or None where this
    Python cannot import it: a job host's Python (CPython 3.10 beside torch_musa) may be older
    than the bot's, and the kernel suite must still collect there."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def needs_bot(*modules: ModuleType | None) -> pytest.MarkDecorator:
    """Skip a test that reads the harness's output with the bot's own code where that code
    cannot be imported (see `bot_module`)."""
    return pytest.mark.skipif(
        any(m is None for m in modules),
        reason="reads the output with the bot's code, which this Python cannot import",
    )


DEVICE = runtime.device
ON_GPU = DEVICE in ("cuda", "musa")

HALF_DTYPES = [torch.float16, torch.bfloat16, torch.float32]
ALL_DTYPES = [*HALF_DTYPES, torch.float64]

# The upstream suite's shapes and output sizes (FlagGems tests/test_adaptive_max_pool3d*.py).
UPSTREAM_SHAPES = [
    (1, 1, 8, 8, 8),
    (2, 3, 16, 16, 16),
    (1, 1, 32, 32, 32),
    (2, 8, 8, 8, 8),
    (1, 1, 7, 7, 7),
    (1, 1, 10, 10, 10),
]
UPSTREAM_OUTPUTS = [(1, 1, 1), (3, 3, 3), (4, 4, 4), (8, 8, 8)]

# Backward tolerance against the float64 reference: fp32 accumulation, one rounding.
TOLERANCE: dict[torch.dtype, tuple[float, float]] = {
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (8e-3, 8e-3),
    torch.float32: (1e-5, 1e-6),
    torch.float64: (1e-12, 1e-12),
}


# The heuristics of an H200 (132 multiprocessors), built without one, and the interpreter's.
H200 = for_device(SimpleNamespace(multi_processor_count=132, total_memory=141 * 10**9))
HEURISTICS = {"h200": H200, "interpreter": INTERPRETER}


def seeded(*key: object) -> torch.Generator:
    """A CPU generator seeded from the test's parameters: reruns draw the same data."""
    return torch.Generator().manual_seed(zlib.crc32(repr(key).encode()))


def randn(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Random normal data made on the CPU, then moved to the device under test."""
    return torch.randn(shape, generator=gen, dtype=torch.float64).to(dtype).to(DEVICE)


def ties_and_nans(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Random values with every other H row rounded (ties inside windows and across chunk
    borders) and 3% NaN, in `dtype` on the test device."""
    x = torch.randn(shape, generator=gen, dtype=torch.float64)
    x[..., ::2, :] = x[..., ::2, :].round()
    x[torch.rand(shape, generator=gen) < 0.03] = float("nan")
    return x.to(dtype).to(DEVICE)


def restrided(x: torch.Tensor, axes: tuple[int, int]) -> torch.Tensor:
    """The same values laid out with `axes` swapped in memory (other strides)."""
    return x.transpose(*axes).contiguous().transpose(*axes)


def meta(shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """A tensor with a shape, strides and dtype but no data: for planning, not running."""
    return torch.empty(shape, dtype=dtype, device="meta")


def reference_forward(
    x: torch.Tensor, output_size: tuple[int, int, int]
) -> tuple[torch.Tensor, torch.Tensor]:
    """PyTorch's adaptive_max_pool3d on the CPU in float64."""
    return F.adaptive_max_pool3d(x.cpu().double(), output_size, return_indices=True)


def reference_backward(grad: torch.Tensor, x: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
    """PyTorch's adaptive_max_pool3d_backward on the CPU in float64."""
    return torch.ops.aten.adaptive_max_pool3d_backward(
        grad.cpu().double(), x.cpu().double(), indices.cpu()
    )


def divisible(shape: tuple[int, ...], output_size: tuple[int, int, int]) -> bool:
    """Whether every spatial axis divides evenly (then windows are disjoint)."""
    return all(i % o == 0 for i, o in zip(shape[-3:], output_size, strict=True))


def assert_close(
    got: torch.Tensor, want: torch.Tensor, rtol: float, atol: float, equal_nan: bool = False
) -> None:
    """`torch.testing.assert_close`'s check: the same shape, dtype and device, then every
    element within `atol + rtol * |want|` (`torch.isclose`). Without its first call's import
    of torch.distributed and sympy (for DTensor inputs): half a second of CPU in every
    process that compares, an operator's GPU job among them."""
    assert got.shape == want.shape, f"shape {tuple(got.shape)} != {tuple(want.shape)}"
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    assert got.device == want.device, f"device {got.device} != {want.device}"
    close = torch.isclose(got, want, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if not bool(close.all()):
        where = (~close).nonzero()
        first = tuple(where[0].tolist())
        raise AssertionError(
            f"{len(where)} of {close.numel()} elements differ (rtol {rtol}, atol {atol}); "
            f"the first at {first}: {got[first].item()} != {want[first].item()}"
        )


def assert_forward_matches(
    got: tuple[torch.Tensor, torch.Tensor], x: torch.Tensor, output_size: tuple[int, int, int]
) -> None:
    """Values exactly equal to the reference (NaN where it has NaN), indices identical."""
    out, indices = got
    want_out, want_idx = reference_forward(x, output_size)
    assert out.shape == want_out.shape and indices.shape == want_idx.shape
    assert out.dtype == x.dtype and indices.dtype == torch.int64
    assert out.device == x.device and indices.device == x.device
    assert torch.equal(indices.cpu(), want_idx), "argmax indices differ from PyTorch's"
    assert_close(out.cpu().double(), want_out, rtol=0, atol=0, equal_nan=True)


def assert_backward_matches(
    got: torch.Tensor, grad: torch.Tensor, x: torch.Tensor, indices: torch.Tensor
) -> None:
    """Close to the float64 reference; bitwise equal to it rounded when windows are disjoint."""
    want = reference_backward(grad, x, indices)
    assert got.shape == x.shape and got.dtype == x.dtype and got.device == x.device
    if got.numel() and divisible(x.shape, tuple(indices.shape[-3:])):
        assert torch.equal(got.cpu(), want.to(x.dtype)), "disjoint windows must copy gradients"
    rtol, atol = TOLERANCE[x.dtype]
    assert_close(got.cpu().double(), want, rtol=rtol, atol=atol)


def big_memory_gpu(gib: int) -> bool:
    """Whether the device is a GPU with at least `gib` GiB free."""
    if not ON_GPU:
        return False
    module = getattr(torch, DEVICE)
    free, _ = module.mem_get_info()
    return free >= gib * 2**30


# Past 2^31 elements in one plane (fp16, 4.3 GB): D = 2056 pooled to 257 windows of 8, so the
# last window holds only flat indices ≥ 2^31.
BIG_SHAPE = (1, 1, 2056, 1024, 1024)
BIG_OUTPUT = (257, 32, 32)
BIG_WINDOW_D = 8
