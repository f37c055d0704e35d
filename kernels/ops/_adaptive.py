"""Shared host-side pieces of the adaptive 3-D pooling operators: argument checks and window math.

Adaptive pooling maps output o of an axis of input size I and output size O to the window
[floor(o·I/O), ceil((o+1)·I/O)); conversely input p lies in the windows of the outputs
floor(p·O/I) ≤ o < ceil((p+1)·O/I). Both counts are bounded, which keeps every kernel loop
bounded. The checks raise before any kernel runs, with PyTorch's wording where it has one.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from functools import lru_cache
from typing import Any

import torch

FLOAT_DTYPES: tuple[torch.dtype, ...] = (
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
)
INT32_LIMIT = 2**31 - 1

Spatial = tuple[int, int, int]


def window_start(o: int, in_size: int, out_size: int) -> int:
    """First input position of output `o`'s window."""
    return (o * in_size) // out_size


def window_end(o: int, in_size: int, out_size: int) -> int:
    """One past the last input position of output `o`'s window."""
    return -((-(o + 1) * in_size) // out_size)


@lru_cache(maxsize=1024)
def max_window(in_size: int, out_size: int) -> int:
    """The largest window of an axis: how many inputs one output reads at most.

    Swapping the arguments gives how many outputs one input belongs to at most.
    """
    if out_size <= 0 or in_size <= 0:
        return 0
    if in_size % out_size == 0:
        return in_size // out_size
    if out_size > 4096:
        return math.ceil(in_size / out_size) + 1  # a safe bound; exactness only saves masked lanes
    return max(
        window_end(o, in_size, out_size) - window_start(o, in_size, out_size)
        for o in range(out_size)
    )


def output_size3(output_size: int | Sequence[int | None], input: torch.Tensor) -> Spatial:
    """Normalize `output_size` to three non-negative ints (None keeps the input's size)."""
    if isinstance(output_size, int):
        sizes: list[int | None] = [output_size] * 3
    else:
        sizes = list(output_size)
    if len(sizes) != 3:
        raise RuntimeError(
            "adaptive_max_pool3d(): internal error: output_size.size() must be 3, "
            f"got {len(sizes)} ({list(sizes)})"
        )
    spatial = input.shape[-3:]
    out: list[int] = []
    for axis, size in enumerate(sizes):
        value = int(spatial[axis]) if size is None else size
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"adaptive_max_pool3d(): output_size must hold ints, got {size!r}")
        if value < 0:
            raise RuntimeError(
                f"adaptive_max_pool3d(): output_size must be non-negative, got {list(sizes)}"
            )
        out.append(value)
    return out[0], out[1], out[2]


def check_input(input: torch.Tensor, name: str = "adaptive_max_pool3d") -> None:
    """The checks PyTorch makes of a pooling input: 4-D or 5-D, non-empty spatial dims, float."""
    if not isinstance(input, torch.Tensor):
        raise TypeError(f"{name}(): input must be a Tensor, got {type(input).__name__}")
    if input.dim() not in (4, 5):
        raise RuntimeError(f"{name}(): Expected 4D or 5D tensor, but got: {list(input.shape)}")
    for dim in range(1, input.dim()):
        if input.shape[dim] == 0:
            raise RuntimeError(
                f"{name}(): Expected input to have non-zero size for non-batch dimensions, "
                f"but input has sizes {list(input.shape)} with dimension {dim} being empty"
            )
    if input.dtype not in FLOAT_DTYPES:
        raise NotImplementedError(f'"{name}" not implemented for {input.dtype}')


def check_backward(grad_output: torch.Tensor, input: torch.Tensor, indices: torch.Tensor) -> None:
    """Shapes, dtypes and devices of a backward call must agree, as PyTorch checks them."""
    name = "adaptive_max_pool3d_backward"
    for label, tensor in (("grad_output", grad_output), ("input", input), ("indices", indices)):
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"{name}(): {label} must be a Tensor, got {type(tensor).__name__}")
    if grad_output.dim() not in (4, 5):
        raise RuntimeError(
            f"{name}(): Expected 4D or 5D gradOutput, but got: {list(grad_output.shape)}"
        )
    check_input(input, name)
    if indices.dtype != torch.int64:
        raise RuntimeError(f"{name}(): expected indices of dtype int64, but got {indices.dtype}")
    if grad_output.dtype != input.dtype:
        raise RuntimeError(
            f"{name}(): expected dtype {input.dtype} for `gradOutput` but got {grad_output.dtype}"
        )
    if indices.dim() != input.dim():
        raise RuntimeError(
            f"{name}(): expected dimensions {input.dim()} for `indices` "
            f"but got dimensions {indices.dim()}"
        )
    expected = list(input.shape[:-3]) + list(indices.shape[-3:])
    if list(indices.shape[:-3]) != list(input.shape[:-3]):
        raise RuntimeError(
            f"{name}(): expected sizes {expected} for `indices` but got {list(indices.shape)}"
        )
    if list(grad_output.shape) != list(indices.shape):
        raise RuntimeError(
            f"{name}(): expected sizes {list(indices.shape)} for `gradOutput` "
            f"but got sizes {list(grad_output.shape)}"
        )
    devices = {grad_output.device, input.device, indices.device}
    if len(devices) != 1:
        raise RuntimeError(
            f"{name}(): expected all tensors on one device, but got grad_output on "
            f"{grad_output.device}, input on {input.device}, indices on {indices.device}"
        )


def as_5d(tensor: torch.Tensor) -> torch.Tensor:
    """A view with a batch dimension of 1 added to an unbatched (4-D) tensor."""
    return tensor.unsqueeze(0) if tensor.dim() == 4 else tensor


def next_pow2(n: int) -> int:
    """The smallest power of two ≥ n (1 for n ≤ 1)."""
    return 1 << max(0, n - 1).bit_length()


def vector_width(t: torch.Tensor, cap: int = 16) -> int:
    """Elements per vector of at most 16 bytes (and `cap` elements) that every row start of `t`
    is aligned to: 1 unless rows are contiguous and the row length and every stride above it
    divide by it. The host passes those strides divided by it, so that Triton, which only
    knows an integer argument's divisibility by 16, can prove the alignment and vectorize."""
    if t.stride(-1) != 1:
        return 1
    vec = min(cap, max(1, 16 // t.element_size()))
    while vec > 1 and any(v % vec for v in (*t.stride()[:-1], t.shape[-1])):
        vec //= 2
    return vec


def span(shape: Sequence[int], strides: Sequence[int]) -> int:
    """The largest element offset reachable in a tensor of this shape and strides, plus one."""
    return 1 + sum(
        (size - 1) * abs(stride) for size, stride in zip(shape, strides, strict=True) if size > 0
    )


def dividing_windows(in_dhw: Sequence[int], out_dhw: Sequence[int]) -> tuple[int, int, int] | None:
    """(KD, KH, KW) when every output size divides its input size (windows tile the input,
    one output per element), else None."""
    if any(o == 0 or i % o for i, o in zip(in_dhw, out_dhw, strict=True)):
        return None
    kd, kh, kw = (i // o for i, o in zip(in_dhw, out_dhw, strict=True))
    return kd, kh, kw


def covering_bounds(in_size: int, out_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per input position along one axis: the first output whose window covers it, and one
    past the last (int64, on the CPU): the backward kernels' candidate outputs."""
    p = torch.arange(in_size, dtype=torch.int64)
    return (p * out_size) // in_size, ((p + 1) * out_size + in_size - 1) // in_size


def divisor(d: int) -> tuple[int, int]:
    """(magic, shift) with x // d == umulhi(2x, magic) >> shift for 0 <= x < 2^31: a division
    by a value fixed at planning time as a multiply-high and a shift in the kernel
    (`_jit_helpers.div_by`) instead of a runtime division's few dozen instructions.
    Granlund and Montgomery's round-up method for 31-bit numerators: the magic fits in 32 bits.
    """
    if not 1 <= d <= INT32_LIMIT:
        raise ValueError(f"divisor {d} is outside 1..2^31-1")
    shift = (d - 1).bit_length()
    return (1 << (31 + shift)) // d + 1, shift


def fits_int32(*values: int) -> bool:
    """Whether offsets up to each value can be computed in 32-bit arithmetic."""
    return all(value <= INT32_LIMIT for value in values)


def signature(*tensors: torch.Tensor) -> tuple[object, ...]:
    """What a launch plan depends on: each tensor's shape, strides, dtype and device."""
    return tuple((t.shape, t.stride(), t.dtype, t.device) for t in tensors)


class PlanCache:
    """Launch plans by call signature, so a repeated call skips the host-side planning.

    The checks and tile arithmetic cost tens of microseconds of Python, more than a small
    kernel takes on the GPU; a plan holds everything but the tensors.
    """

    def __init__(self, limit: int = 512) -> None:
        self._plans: dict[Hashable, Callable[..., Any]] = {}
        self._limit = limit

    def get(self, key: Hashable | None) -> Callable[..., Any] | None:
        return None if key is None else self._plans.get(key)

    def put(self, key: Hashable | None, plan: Callable[..., Any]) -> None:
        if key is None:
            return
        if len(self._plans) >= self._limit:
            self._plans.clear()
        self._plans[key] = plan
