"""What the adaptive 3-D pooling kernels share: argument checks, window arithmetic on the host
and in Triton, and the problem each operator's plan is made for.

Adaptive pooling maps output o of an axis of input size I and output size O to the window
[floor(o·I/O), ceil((o+1)·I/O)); conversely input p lies in the windows of the outputs
floor(p·O/I) ≤ o < ceil((p+1)·O/I). Both counts are bounded, which keeps every kernel loop
bounded. The checks raise before any kernel runs, with PyTorch's wording where it has one.
The `@triton.jit` helpers at the end are inlined by Triton where a kernel calls them.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Any

import torch
import triton
import triton.language as tl

from kernels import native
from kernels.launch import Launch, native_state

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
        try:
            sizes = list(output_size)
        except TypeError:
            raise TypeError(
                "adaptive_max_pool3d(): output_size must be an int or a sequence of three, "
                f"got {output_size!r}"
            ) from None
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


def slice_tile(h: int, w: int, elements: int, row_width: int) -> tuple[int, int]:
    """(BH, BW): about `elements` elements of one depth slice of H×W a program, as wide along
    W as the row allows, up to `row_width` (the backward's disjoint and rows kernels)."""
    bw = min(next_pow2(w), row_width)
    return min(next_pow2(h), max(1, elements // bw)), bw


def covering_bounds(in_size: int, out_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Per input position along one axis: the first output whose window covers it, and one
    past the last (int64, on the CPU): the backward kernels' candidate outputs."""
    p = torch.arange(in_size, dtype=torch.int64)
    return (p * out_size) // in_size, ((p + 1) * out_size + in_size - 1) // in_size


def by(d: int) -> tuple[int, int, int]:
    """(d, magic, shift): what a kernel's `div_by` takes to divide by `d` without a runtime
    division (for numerators of 32-bit offsets; with `WIDE` offsets it divides by `d`)."""
    return (d, *divisor(d)) if fits_int32(d) else (d, 0, 0)


def divisor(d: int) -> tuple[int, int]:
    """(magic, shift) with x // d == umulhi(2x, magic) >> shift for 0 <= x < 2^31: a division
    by a value fixed at planning time as a multiply-high and a shift in the kernel
    (`div_by` below) instead of a runtime division's few dozen instructions.
    Granlund and Montgomery's round-up method for 31-bit numerators: the magic fits in 32 bits.
    """
    if not 1 <= d <= INT32_LIMIT:
        raise ValueError(f"divisor {d} is outside 1..2^31-1")
    shift = (d - 1).bit_length()
    return (1 << (31 + shift)) // d + 1, shift


def fits_int32(*values: int) -> bool:
    """Whether offsets up to each value can be computed in 32-bit arithmetic."""
    return all(value <= INT32_LIMIT for value in values)


def signature(t: torch.Tensor) -> tuple[object, ...]:
    """What a launch plan depends on of a tensor it reads: shape, strides, dtype, device, and
    whether its data is 16-byte aligned (a compiled kernel assumes what its first call's
    pointers were)."""
    return (t.shape, t.stride(), t.dtype, t.device, t.data_ptr() % 16 == 0)


def backward_signature(
    grad_output: torch.Tensor, input: torch.Tensor, indices: torch.Tensor
) -> tuple[object, ...]:
    """What a backward plan depends on: the gradient and indices it reads, and of the input,
    whose data it never reads, only the shape, dtype and device of the gradient it makes."""
    return (*signature(grad_output), *signature(indices), input.shape, input.dtype, input.device)


def allocator(
    shape: Sequence[int], dtype: torch.dtype, device: torch.device
) -> Callable[[], torch.Tensor]:
    """`new()` -> an uninitialized contiguous tensor of this shape, dtype and device.

    `torch.empty_like` of a one-element tensor expanded to the shape (not dense, so its
    likeness is contiguous) costs about half of `torch.empty(shape, dtype=, device=)`, whose
    argument parsing is most of a tiny call's allocation (1.9 against 3.2-3.6 µs on an H200's
    host)."""
    if not all(size > 0 for size in shape) or all(size == 1 for size in shape):
        # A template of these sizes would be dense, and its strides kept: no shortcut.
        return partial(torch.empty, tuple(shape), dtype=dtype, device=device)
    one = torch.empty((1,) * len(shape), dtype=dtype, device=device)
    return partial(torch.empty_like, one.expand(*shape))


# Devices whose tiny calls are host-bound enough for the C++ helper to pay its first build.
NATIVE_DEVICES = frozenset({"cuda"})


def native_key(extra: object, *tensors: torch.Tensor) -> tuple[Any, ...] | None:
    """The C++ helper's key of a call with these tensors, or None where the helper does not
    serve the first tensor's device or could not be built."""
    helper = native.host() if tensors[0].device.type in NATIVE_DEVICES else None
    return None if helper is None else helper.key(extra, *tensors)


def output_templates(
    shape: Sequence[int], dtypes: Sequence[torch.dtype], device: torch.device
) -> tuple[torch.Tensor, ...]:
    """One-element tensors expanded to `shape`, one a dtype: what the C++ helper makes a
    call's outputs like (contiguous, whatever a template's strides)."""
    return tuple(
        torch.empty((1,) * len(shape), dtype=dtype, device=device).expand(*shape)
        for dtype in dtypes
    )


class PlanCache:
    """Launch plans by call signature, so a repeated call skips the host-side planning.

    The checks and tile arithmetic cost tens of microseconds of Python, more than a small
    kernel takes on the GPU; a plan holds everything but the tensors.
    """

    def __init__(self, limit: int = 512) -> None:
        self._plans: dict[Hashable, Callable[..., Any]] = {}
        self._limit = limit
        # Plans the C++ helper runs whole: its `call(native, extra, *tensors)` looks them up
        # by its own `key(extra, *tensors)` (kernels.native); empty until a plan's first call
        # found its lean launch, and whenever the helper is not in use.
        self.native: dict[tuple[Any, ...], tuple[Any, ...]] = {}
        self.native_call: Callable[..., Any] = lambda states, extra, *tensors: None
        self._native_refused = False

    def get(self, key: Hashable | None) -> Callable[..., Any] | None:
        return None if key is None else self._plans.get(key)

    def run_native(self, extra: object, *tensors: torch.Tensor) -> Any:
        """A call's result from the C++ helper where it knows the call's plan, else None."""
        try:
            return self.native_call(self.native, extra, *tensors)
        except TypeError:  # this Triton's launch function takes other arguments
            self._native_refused = True
            self.native.clear()
            return None

    def put_native(
        self,
        key: tuple[Any, ...] | None,
        launch: object,
        templates: Sequence[torch.Tensor],
        passes: Sequence[int],
    ) -> None:
        """After a plan's first call: have the helper run calls of `key` (its `key(extra,
        *tensors)` of that call) with `launch`'s lean path, making outputs like `templates`
        and passing the call's tensors at `passes` before them. Nothing where the helper, the
        lean path or the key is missing, or the helper was refused."""
        helper = native.host() if key is not None else None
        if helper is None or self._native_refused or not isinstance(launch, Launch):
            return
        state = native_state(launch, templates, passes)
        if state is not None:
            self.native[key] = state
            self.native_call = helper.call

    def put(self, key: Hashable | None, plan: Callable[..., Any]) -> None:
        if key is None:
            return
        if len(self._plans) >= self._limit:
            self._plans.clear()
            self.native.clear()
        self._plans[key] = plan


def accumulator_dtype(dtype: torch.dtype) -> torch.dtype:
    """The type compares and sums run in: fp64 for fp64, else fp32 (exact for every input)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def accumulator(dtype: torch.dtype) -> tl.dtype:
    """`accumulator_dtype` as Triton's type."""
    return tl.float64 if accumulator_dtype(dtype) == torch.float64 else tl.float32


@dataclass(frozen=True)
class Forward:
    """What a forward plan depends on: the 5-D input's shape, strides and dtype, the output
    size, and the largest window along each axis (the bound of every kernel's loops)."""

    x: torch.Tensor
    out: Spatial
    windows: Spatial

    @classmethod
    def of(cls, x: torch.Tensor, out: Spatial) -> Forward:
        """The problem of pooling the 5-D `x` to `out`."""
        d, h, w = x.shape[2:]
        return cls(x, out, (max_window(d, out[0]), max_window(h, out[1]), max_window(w, out[2])))

    @property
    def elements(self) -> int:
        """Elements in the largest window."""
        return math.prod(self.windows)

    @property
    def acc(self) -> tl.dtype:
        return accumulator(self.x.dtype)


@dataclass(frozen=True)
class Backward:
    """What a backward plan depends on: the 5-D gradient and indices (any strides) and the
    5-D input gradient to write (contiguous, as PyTorch allocates it)."""

    grad: torch.Tensor
    idx: torch.Tensor
    gin: torch.Tensor

    @property
    def in_dhw(self) -> Spatial:
        d, h, w = self.gin.shape[2:]
        return d, h, w

    @property
    def out_dhw(self) -> Spatial:
        od, oh, ow = self.grad.shape[2:]
        return od, oh, ow

    @property
    def planes(self) -> int:
        """(n, c) planes."""
        return int(self.gin.shape[0] * self.gin.shape[1])

    @property
    def candidates(self) -> Spatial:
        """Per axis, how many outputs' windows one input element can lie in."""
        (d, h, w), (od, oh, ow) = self.in_dhw, self.out_dhw
        return max_window(od, d), max_window(oh, h), max_window(ow, w)

    @property
    def candidate_outputs(self) -> int:
        """How many outputs' windows one input element can lie in, at most (1: no overlaps;
        2: one neighbouring window, on one axis)."""
        return math.prod(self.candidates)

    @property
    def acc(self) -> tl.dtype:
        return accumulator(self.gin.dtype)


@triton.jit
def window(o, in_size, out_size):
    """Output `o`'s window along one axis: [floor(o·I/O), ceil((o+1)·I/O))."""
    return (o * in_size) // out_size, ((o + 1) * in_size + out_size - 1) // out_size


@triton.jit
def div_by(x, divisor, WIDE: tl.constexpr):
    """x // d for x >= 0, `divisor` the tuple (d, magic, shift) of `divisor(d)`: a
    multiply-high and a shift where x is 32-bit (x < 2^31), a division where WIDE."""
    if WIDE:
        return x // divisor[0]
    else:
        hi = tl.umulhi(x.to(tl.uint32) * 2, divisor[1].to(tl.uint32))
        return (hi >> divisor[2]).to(x.dtype)


@triton.jit
def window_by(o, in_size, by_out, WIDE: tl.constexpr):
    """`window` with the division by the output size as `div_by` (`by_out` = the tuple
    (out_size, magic, shift) of `divisor(out_size)`)."""
    start = div_by(o * in_size, by_out, WIDE)
    end = div_by((o + 1) * in_size + by_out[0] - 1, by_out, WIDE)
    return start, end


@triton.jit
def unflatten3_by(j, by_mid, by_last, WIDE: tl.constexpr):
    """`unflatten3` with its divisions as `div_by` (`by_mid`, `by_last`: `divisor` tuples)."""
    rest = div_by(j, by_last, WIDE)
    first = div_by(rest, by_mid, WIDE)
    return first, rest - first * by_mid[0], j - rest * by_last[0]


@triton.jit
def unflatten3(j, MID, LAST):
    """A flat number over three axes (last fastest) -> its three coordinates."""
    last = j % LAST
    rest = j // LAST
    return rest // MID, rest % MID, last


@triton.jit
def unflatten4(j, B, C, D):
    """A flat number over four axes (last fastest) -> its four coordinates."""
    rest, c, d = unflatten3(j, C, D)
    return rest // B, rest % B, c, d


@triton.jit
def keep_first(v, step, best, best_step):
    """One step of a scan-order walk: `>` keeps the first maximum and its step (a NaN never
    takes it: whoever needs NaN tracks it apart)."""
    take = v > best
    return tl.where(take, v, best), tl.where(take, step, best_step)


@triton.jit
def keep_first_max(v, step, best, best_step, nan_step):
    """`keep_first`, and the last NaN's step."""
    best, best_step = keep_first(v, step, best, best_step)
    return best, best_step, tl.where(v != v, step, nan_step)


@triton.jit
def merge_lanes(best, pos, BIG: tl.constexpr, AXIS: tl.constexpr):
    """Lanes' running (maximum, position) pairs -> one per row along AXIS, as PyTorch picks:
    the last NaN if any lane holds one, else the first maximum (smallest position; lanes
    still at BIG saw nothing). `key_nans` and `merge_keyed` give the same answer in two
    reductions instead of three (column_max uses them; the other kernels' are not timed)."""
    nan = best != best
    nan_pos = tl.max(tl.where(nan, pos, -1), axis=AXIS)
    clean = tl.where(nan, float("-inf"), best)
    top = tl.max(clean, axis=AXIS)
    hit = (clean == tl.expand_dims(top, AXIS)) & (pos != BIG)
    first = tl.min(tl.where(hit, pos, BIG), axis=AXIS)
    has_nan = nan_pos >= 0
    return tl.where(has_nan, float("nan"), top), tl.where(has_nan, nan_pos, first)


@triton.jit
def key_nans(best, pos, saw_nan):
    """Lanes' (value, position) as `merge_keyed` takes them: a lane whose value is its last
    NaN becomes +inf keyed -position - 1, so it wins every merge it is in (a tie with a real
    inf too, its key being negative) and, of two NaNs, the later one wins."""
    return tl.where(saw_nan, float("inf"), best), tl.where(saw_nan, -pos - 1, pos)


@triton.jit
def merge_keyed(value, key, BIG: tl.constexpr, AXIS: tl.constexpr):
    """`merge_lanes` over `key_nans`' lanes, in two reductions: the maximum, then the least key
    holding it; a negative key is a NaN's (the value NaN, the position decoded)."""
    top = tl.max(value, axis=AXIS)
    first = tl.min(tl.where(value == tl.expand_dims(top, AXIS), key, BIG), axis=AXIS)
    nan = first < 0
    return tl.where(nan, float("nan"), top), tl.where(nan, -first - 1, first)
