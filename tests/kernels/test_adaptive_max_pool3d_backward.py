"""Accuracy of adaptive_max_pool3d_backward (generic and Moore Threads) against PyTorch in float64.

Both implementations run on every device: the Moore Threads one through
`runtime.function(op, "mthreads")`, which forces the mthreads vendor for the call. As for the
forward: the upstream grid and edge cases through the default plans, each kernel forced on
small shapes in every dtype, and the dispatch tables' choices as plans only. Across the shape
grids, a case runs on the Moore Threads implementation only where it plans a kernel or tiles
of its own on this device (`own_plan`): elsewhere it computes what the generic case computes.
"""

from __future__ import annotations

import dataclasses
import importlib
import logging
import math
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import kernels
from kernels import dispatch, registry, runtime
from kernels.heuristics import current
from kernels.ops._adaptive import PlanCache, max_window, window_end, window_start
from kernels.ops.adaptive_max_pool3d_backward import (
    DISPATCH,
    disjoint,
    fill_scatter,
    plan_with,
    problem,
    rows,
    select,
    small_input,
    zeroed_scatter,
)
from tests.kernels.support import (
    ALL_DTYPES,
    BIG_OUTPUT,
    BIG_SHAPE,
    BIG_WINDOW_D,
    DEVICE,
    H200,
    HALF_DTYPES,
    HEURISTICS,
    ON_GPU,
    UPSTREAM_OUTPUTS,
    UPSTREAM_SHAPES,
    assert_backward_matches,
    assert_close,
    big_memory_gpu,
    meta,
    randn,
    reference_forward,
    restrided,
    seeded,
)

pytestmark = pytest.mark.adaptive_max_pool3d_backward

OP = "adaptive_max_pool3d_backward"
IMPLS = ["generic", "mthreads"]
MTHREADS_LOG = "KERNELS_MTHREADS ADAPTIVE_MAX_POOL3D_BACKWARD"
REPO = Path(__file__).resolve().parents[2]
GENERIC = importlib.import_module(registry.operator(OP).module)
MTHREADS = importlib.import_module(f"{registry.vendor('mthreads').package}.ops.{OP}")
expand, gather = MTHREADS.expand, MTHREADS.gather


def backward(impl: str) -> Callable[..., torch.Tensor]:
    return runtime.function(OP, impl)


def case(
    shape: tuple[int, ...], output_size: tuple[int, int, int], dtype: torch.dtype, *key: object
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random input, its reference argmax indices, and a random gradient, on the device."""
    gen = seeded(shape, output_size, dtype, *key)
    x = randn(shape, dtype, gen)
    _, indices = reference_forward(x, output_size)
    grad = randn(tuple(indices.shape), dtype, gen)
    return grad, x, indices.to(DEVICE)


def own_plan(shape: tuple[int, ...], output_size: tuple[int, int, int], dtype: torch.dtype) -> bool:
    """Whether the Moore Threads implementation plans this case otherwise than the generic
    one: a kernel or tiles of its own. Where it takes the generic kernel with the generic
    tiles, or hands the case to the generic op (float64: MUSA has none; past its grid
    limits), it computes what the generic case computes on the same data (`case` is seeded
    without the implementation): only the generic case runs. Its paths themselves, the
    fallbacks among them: test_mthreads_proof_log_* and test_mthreads_falls_back_*."""
    if dtype not in MTHREADS.SUPPORTED_DTYPES:
        return False
    batched = shape if len(shape) == 5 else (1, *shape)
    out = (*batched[:-3], *output_size)
    p = problem(meta(out, dtype), meta(batched, dtype), meta(out, torch.int64))
    ours, theirs = select(p), MTHREADS.select(p)
    return theirs is not None and (theirs[0].kernel, theirs[1]) != (ours[0].kernel, ours[1])


def with_impls(
    cases: list[tuple[tuple[int, ...], tuple[int, int, int], torch.dtype]],
) -> list[tuple[tuple[int, ...], tuple[int, int, int], torch.dtype, str]]:
    """Each case on the generic implementation, and on Moore Threads' where `own_plan`."""
    return [(*c, impl) for c in cases for impl in IMPLS if impl == "generic" or own_plan(*c)]


UPSTREAM = with_impls(
    [(s, o, d) for s in UPSTREAM_SHAPES for o in UPSTREAM_OUTPUTS for d in ALL_DTYPES]
)


@pytest.mark.parametrize(("shape", "output_size", "dtype", "impl"), UPSTREAM, ids=str)
def test_upstream_shapes(
    shape: tuple[int, ...], output_size: tuple[int, int, int], dtype: torch.dtype, impl: str
) -> None:
    grad, x, indices = case(shape, output_size, dtype)
    assert_backward_matches(backward(impl)(grad, x, indices), grad, x, indices)


OTHER_CASES = [
    ((2, 3, 5, 9, 13), (2, 4, 5)),  # non-cubic, nothing divides
    ((1, 2, 6, 4, 11), (4, 7, 3)),  # upsampling along H
    ((1, 1, 3, 2, 5), (7, 5, 9)),  # upsampling on every axis: several windows per element
    ((2, 2, 4, 6, 8), (2, 3, 4)),  # divisible, non-cubic windows (2, 2, 2)
    ((1, 3, 6, 9, 12), (2, 3, 3)),  # divisible, windows (3, 3, 4)
    ((1, 1, 4, 70, 300), (2, 3, 2)),  # rows wider than one tile
    ((3, 6, 7, 8), (2, 3, 4)),  # unbatched (C, D, H, W)
    ((2, 4, 6, 8), (2, 3, 4)),  # unbatched, divisible
    ((1, 2, 8, 64, 72), (4, 16, 18)),  # divisible, past the small_input limit
]
# The dtypes in turn: each shape once, every dtype several times.
OTHER = [(s, o, HALF_DTYPES[i % 3]) for i, (s, o) in enumerate(OTHER_CASES)]


@pytest.mark.parametrize(("shape", "output_size", "dtype", "impl"), with_impls(OTHER), ids=str)
def test_other_shapes(
    shape: tuple[int, ...], output_size: tuple[int, int, int], dtype: torch.dtype, impl: str
) -> None:
    grad, x, indices = case(shape, output_size, dtype)
    assert_backward_matches(backward(impl)(grad, x, indices), grad, x, indices)


def run_forced(
    kernel: Any, grad: torch.Tensor, x: torch.Tensor, indices: torch.Tensor, config: Any = None
) -> torch.Tensor:
    """The gradient computed by `kernel` (a kernel module, generic or vendor's), forced, with
    `config` or its default config on this device."""
    h = current()

    def launch(p: Any) -> Any:
        return kernel.plan(p, config or kernel.default(p, h), h)

    plan = plan_with(grad, x, indices, launch)
    assert plan is not None
    return plan(grad, indices)


# Each kernel forced on small shapes it can take (the generic ones in every dtype, the Moore
# Threads ones in the dtypes MUSA has): divisible and non-divisible where it takes both.
GENERIC_SHAPES: dict[str, list[tuple[tuple[int, ...], tuple[int, int, int]]]] = {
    "small_input": [((1, 2, 4, 6, 8), (2, 3, 4)), ((2, 5, 6, 9), (5, 3, 3))],
    "disjoint": [((1, 2, 4, 6, 8), (2, 3, 4)), ((2, 3, 4, 4), (1, 2, 2))],
    "fill_scatter": [((1, 2, 6, 9, 12), (2, 3, 3)), ((1, 2, 3, 5, 7), (2, 3, 4))],
    "zeroed_scatter": [((2, 4, 6, 8), (2, 3, 4)), ((1, 2, 3, 5, 7), (2, 3, 4))],
    "rows": [((2, 2, 4, 4), (1, 2, 2)), ((1, 1, 2, 3, 4), (3, 5, 7))],
}
MTHREADS_SHAPES: dict[str, list[tuple[tuple[int, ...], tuple[int, int, int]]]] = {
    "expand": [((1, 2, 4, 6, 8), (2, 3, 4)), ((2, 3, 4, 4), (1, 2, 2))],
    "gather": [((2, 4, 6, 8), (2, 3, 4)), ((1, 1, 2, 3, 4), (3, 5, 7))],
}
KERNELS = {
    **{k: dispatch.named(DISPATCH, k).kernel for k in GENERIC_SHAPES},
    **{k: dispatch.named(MTHREADS.DISPATCH, k).kernel for k in MTHREADS_SHAPES},
}
KERNEL_CASES = [
    (kernel, shape, output_size, dtype)
    for shapes, dtypes in ((GENERIC_SHAPES, ALL_DTYPES), (MTHREADS_SHAPES, HALF_DTYPES))
    for kernel, cases in shapes.items()
    for shape, output_size in cases
    for dtype in dtypes
]


@pytest.mark.parametrize(("kernel", "shape", "output_size", "dtype"), KERNEL_CASES, ids=str)
def test_each_kernel(
    kernel: str, shape: tuple[int, ...], output_size: tuple[int, int, int], dtype: torch.dtype
) -> None:
    grad, x, indices = case(shape, output_size, dtype, kernel)
    got = run_forced(KERNELS[kernel], grad, x, indices)
    assert_backward_matches(got, grad, x, indices)


@pytest.mark.parametrize("kernel", list(KERNELS))
def test_each_kernel_with_other_strides(kernel: str) -> None:
    """The gradient and indices laid out with other strides (the same values)."""
    shape, output_size = {**GENERIC_SHAPES, **MTHREADS_SHAPES}[kernel][-1]
    grad, x, indices = case(shape, output_size, torch.float32, "strided")
    grad_t, indices_t = restrided(grad, (-1, -3)), restrided(indices, (-2, -3))
    got = run_forced(KERNELS[kernel], grad_t, x, indices_t)
    assert_backward_matches(got, grad, x, indices)


SMALL_TILES = [
    # Several programs, tiles and row groups per depth slice, where the device has them.
    ("small_input", small_input.Config(64, 1), (1, 2, 4, 6, 8), (2, 3, 4)),
    ("disjoint", disjoint.Config(2, 4, 1), (1, 1, 4, 6, 8), (2, 3, 4)),
    ("disjoint", disjoint.Config(2, 4, 1, vector_stores=False), (1, 1, 4, 6, 8), (2, 3, 4)),
    ("rows", rows.Config(2, 4), (1, 1, 3, 5, 9), (2, 3, 4)),
    ("rows", rows.Config(4, 8), (1, 1, 2, 3, 4), (3, 5, 7)),
    ("zeroed_scatter", zeroed_scatter.tiles(16), (1, 1, 3, 5, 7), (2, 3, 4)),
    ("expand", expand.Config(1, 2, 4, 1), (1, 1, 4, 6, 8), (2, 3, 4)),
    ("gather", gather.Config(1, 2, 4, 1), (1, 1, 2, 3, 4), (3, 5, 7)),
]


@pytest.mark.parametrize(("kernel", "config", "shape", "output_size"), SMALL_TILES, ids=str)
def test_small_tiles(
    kernel: str, config: Any, shape: tuple[int, ...], output_size: tuple[int, int, int]
) -> None:
    grad, x, indices = case(shape, output_size, torch.float32, "small tiles")
    assert_backward_matches(run_forced(KERNELS[kernel], grad, x, indices, config), grad, x, indices)


@pytest.mark.parametrize(
    ("tile", "box"),
    [(40, 0), (10**6, 32)],
    ids=["rows-of-a-slice", "a-plane-32-outputs-at-a-time"],
)
@pytest.mark.parametrize(
    ("shape", "output_size"),
    [((1, 1, 2, 4, 12), (1, 2, 3)), ((1, 1, 3, 5, 7), (2, 3, 4))],
    ids=str,
)
def test_fill_scatter_tiles(
    shape: tuple[int, ...], output_size: tuple[int, int, int], tile: int, box: int
) -> None:
    """Fill-scatter tiles of a few rows (split H), and a whole plane walked 32 outputs at a
    time."""
    grad, x, indices = case(shape, output_size, torch.float32, "fill tiles")
    config = fill_scatter.tiles(problem(grad, x, indices), current(), tile)
    config = fill_scatter.Config(tile, box or config.box, config.zero_block, config.num_warps)
    got = run_forced(fill_scatter, grad, x, indices, config)
    assert_backward_matches(got, grad, x, indices)


@pytest.mark.parametrize(
    ("shape", "output_size", "tile", "rows", "box", "zeros", "dtype"),
    [
        ((1, 2, 7, 8, 6), (3, 2, 4), 60, 0, 4, 0, torch.float16),  # two slices
        ((1, 2, 7, 8, 6), (3, 2, 4), 210, 0, 4, 0, torch.float32),  # a plane
        ((1, 2, 7, 8, 6), (3, 2, 4), 10**6, 4, 4, 0, torch.float16),  # rows at an H window edge
        ((1, 2, 6, 16, 5), (4, 10, 3), 10**6, 8, 8, 0, torch.float32),  # all depths, half of H
        ((1, 2, 6, 16, 5), (4, 10, 3), 100, 5, 8, 0, torch.float16),  # five rows: windows cut
        ((1, 2, 7, 9, 4), (3, 4, 3), 40, 3, 8, 0, torch.bfloat16),  # every axis overlapping
        # Zero steps longer than a slice's run of rows (3+3+2 rows), and shorter (8+8 rows)
        ((1, 2, 7, 8, 6), (3, 2, 4), 10**6, 3, 4, 64, torch.float16),
        ((1, 2, 5, 16, 5), (4, 10, 3), 10**6, 8, 8, 32, torch.float32),
    ],
    ids=str,
)
def test_fill_scatter_writes_every_element(
    shape: tuple[int, ...],
    output_size: tuple[int, int, int],
    tile: int,
    rows: int,
    box: int,
    zeros: int,
    dtype: torch.dtype,
) -> None:
    """Every element of the gradient is written (zero or a sum), whatever was in memory: the
    kernel launched into a NaN-filled gradient, a few outputs walked at a time over windows
    that overlap, tiles of whole slices or of `rows` rows of H over as many slices as `tile`
    holds, whatever windows they cut, `zeros` elements a zero step (0: the default)."""
    grad, x, indices = case(shape, output_size, dtype, "fill every element")
    base = fill_scatter.tiles(problem(grad, x, indices), current(), tile, rows)
    config = dataclasses.replace(base, box=box, zero_block=zeros or base.zero_block)
    grad_input = torch.full(x.shape, float("nan"), dtype=dtype, device=x.device)
    fill_scatter.plan(problem(grad, grad_input, indices), config, current())(
        grad, indices, grad_input
    )
    assert_backward_matches(grad_input, grad, x, indices)


@pytest.mark.parametrize(
    ("shape", "output_size", "tile", "rows", "dtype"),
    [
        ((1, 2, 7, 8, 6), (3, 2, 4), 60, 0, torch.float16),  # two slices
        ((1, 2, 7, 8, 6), (3, 2, 4), 10**6, 0, torch.float32),  # a plane
        ((1, 2, 6, 16, 5), (4, 10, 3), 100, 5, torch.bfloat16),  # five rows: windows cut
        ((2, 2, 7, 9, 4), (3, 4, 3), 40, 3, torch.float32),  # every axis overlapping
        ((1, 2, 9, 8, 7), (4, 3, 3), 112, 0, torch.float64),  # the fp32 rule's dtype too
    ],
    ids=str,
)
def test_fill_scatter_in_one_box(
    shape: tuple[int, ...],
    output_size: tuple[int, int, int],
    tile: int,
    rows: int,
    dtype: torch.dtype,
) -> None:
    """One box holding every output a tile meets, the neighbours' indices and gradients taken
    from it instead of loaded: every element written, the same bits as the walk a few
    outputs at a time, on inputs of three values (many elements chosen by several windows)."""
    gen = seeded(shape, output_size, "in one box")
    x = torch.randint(0, 3, shape, generator=gen).to(dtype).to(DEVICE)
    _, indices = reference_forward(x, output_size)
    indices = indices.to(DEVICE)
    grad = randn(tuple(indices.shape), dtype, gen)
    p = problem(grad, x, indices)
    # Walked 8 outputs at a time (4 took twice the interpreter's time for the same check).
    walked = dataclasses.replace(fill_scatter.tiles(p, current(), tile, rows), box=8)
    boxed = fill_scatter.in_one_box(p, walked)
    assert boxed.in_box and boxed.box >= 2 * walked.box  # more than one walked box's outputs
    results = []
    for config in (walked, boxed):
        grad_input = torch.full(x.shape, float("nan"), dtype=dtype, device=x.device)
        target = problem(grad, grad_input, indices)
        fill_scatter.plan(target, config, current())(grad, indices, grad_input)
        assert_backward_matches(grad_input, grad, x, indices)
        results.append(grad_input)
    assert torch.equal(results[0], results[1])


def test_fill_scatter_refuses_a_box_too_small_or_too_many_candidates() -> None:
    grad, x, indices = case((1, 2, 7, 8, 6), (3, 2, 4), torch.float32, "refuse box")
    p = problem(grad, x, indices)
    boxed = fill_scatter.in_one_box(p, fill_scatter.tiles(p, current(), 10**6))
    with pytest.raises(ValueError, match="box must hold the 24 outputs a tile meets"):
        fill_scatter.plan(p, dataclasses.replace(boxed, box=16), current())
    grad, x, indices = case((1, 1, 2, 3, 4), (3, 5, 7), torch.float32, "refuse box")  # upsampled
    p = problem(grad, x, indices)
    with pytest.raises(ValueError, match="two candidates an axis"):
        fill_scatter.plan(
            p, fill_scatter.in_one_box(p, fill_scatter.tiles(p, current(), 24)), current()
        )


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("output_size", [(3, 4, 4), (2, 3, 3)], ids=str)
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
def test_channels_last_3d_input(
    dtype: torch.dtype, output_size: tuple[int, int, int], impl: str
) -> None:
    grad, x, indices = case((2, 5, 6, 6, 9), output_size, dtype, "cl")
    x = x.to(memory_format=torch.channels_last_3d)
    got = backward(impl)(grad, x, indices)
    assert_backward_matches(got, grad, x, indices)
    want = torch.ops.aten.adaptive_max_pool3d_backward(grad, x, indices)
    assert got.stride() == want.stride(), "grad_input memory format differs from PyTorch's"


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("output_size", [(3, 4, 5), (2, 2, 4)], ids=str)
def test_non_contiguous_grad_and_indices(output_size: tuple[int, int, int], impl: str) -> None:
    grad, x, indices = case((2, 3, 6, 8, 12), output_size, torch.float32, "strided")
    # Same values, other strides: transposed copies and an expanded (stride 0) channel.
    grad_t = restrided(grad, (2, 4))
    indices_t = indices.permute(0, 1, 3, 2, 4).contiguous().permute(0, 1, 3, 2, 4)
    assert not grad_t.is_contiguous() and not indices_t.is_contiguous()
    assert_backward_matches(backward(impl)(grad_t, x, indices_t), grad, x, indices)
    grad_e = grad[:, :1].expand(-1, 3, -1, -1, -1)
    indices_e = indices[:, :1].expand(-1, 3, -1, -1, -1)
    # The reference gets contiguous copies: PyTorch's CPU kernel misreads stride-0 indices.
    got = backward(impl)(grad_e, x, indices_e)
    assert_backward_matches(got, grad_e.contiguous(), x, indices_e.contiguous())


@pytest.mark.parametrize("impl", IMPLS)
def test_non_contiguous_input(impl: str) -> None:
    base = randn((2, 4, 9, 12, 10), torch.float32, seeded("strided input"))
    x = base.transpose(2, 4)[:, 1:, ::2]
    _, indices = reference_forward(x, (3, 2, 4))
    grad = randn(tuple(indices.shape), torch.float32, seeded("strided grad"))
    indices = indices.to(DEVICE)
    got = backward(impl)(grad, x, indices)
    assert_backward_matches(got, grad, x, indices)
    want = torch.ops.aten.adaptive_max_pool3d_backward(grad, x, indices)
    assert got.stride() == want.stride()


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("shape", "output_size"),
    [((0, 2, 4, 4, 4), (2, 2, 2)), ((0, 4, 4, 4), (3, 3, 3)), ((1, 2, 4, 5, 6), (0, 2, 2))],
    ids=str,
)
def test_empty(
    shape: tuple[int, ...],
    output_size: tuple[int, int, int],
    impl: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    x = torch.randn(shape).to(DEVICE)
    indices = torch.zeros((*shape[:-3], *output_size), dtype=torch.int64, device=DEVICE)
    grad = torch.randn(indices.shape).to(DEVICE)
    with caplog.at_level(logging.DEBUG, logger="kernels.backends._mthreads"):
        got = backward(impl)(grad, x, indices)
    assert caplog.messages == ([f"{MTHREADS_LOG} path=empty"] if impl == "mthreads" else [])
    assert got.shape == x.shape
    assert torch.equal(got.cpu(), torch.zeros(shape)), "no window: every gradient is zero"


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_ties_through_forward(dtype: torch.dtype, impl: str) -> None:
    """Gradients land on the first maximum of each window (many ties among integers)."""
    gen = seeded("ties", dtype)
    x = torch.randint(0, 3, (2, 3, 9, 10, 11), generator=gen).to(dtype).to(DEVICE)
    _, indices = kernels.adaptive_max_pool3d(x, (4, 3, 5))
    grad = randn(tuple(indices.shape), dtype, gen)
    assert_backward_matches(backward(impl)(grad, x, indices), grad, x, indices)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("shape", "output_size", "dtype"),
    [((1, 1, 2, 3, 4), (3, 5, 7), torch.float16), ((1, 2, 3, 5, 7), (2, 3, 4), torch.bfloat16)],
    ids=["upsampling", "overlaps"],
)
def test_bitwise_deterministic(
    shape: tuple[int, ...], output_size: tuple[int, int, int], dtype: torch.dtype, impl: str
) -> None:
    """Elements that gather from several windows (rows, gather, the scatters): the order of
    the sum must not move."""
    grad, x, indices = case(shape, output_size, dtype, "det")
    first = backward(impl)(grad, x, indices)
    assert torch.equal(first, backward(impl)(grad, x, indices))


@pytest.mark.parametrize(
    ("shape", "output_size", "path"),
    [
        ((1, 2, 8, 8, 8), (4, 4, 4), "small_input"),
        ((1, 2, 16, 64, 64), (8, 32, 32), "expand"),  # past small_input's size limit
        ((1, 2, 16, 8, 16), (7, 4, 4), "fill_scatter"),  # overlaps on D only
        ((2, 3, 7, 9, 10), (3, 4, 4), "zeroed_scatter"),
        ((1, 2, 3, 3, 3), (8, 8, 8), "gather"),
    ],
    ids=str,
)
def test_mthreads_proof_log_names_the_path_that_ran(
    shape: tuple[int, ...],
    output_size: tuple[int, int, int],
    path: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    grad, x, indices = case(shape, output_size, torch.float16, "log")
    with caplog.at_level(logging.DEBUG, logger="kernels.backends._mthreads"):
        got = backward("mthreads")(grad, x, indices)
    assert caplog.messages == [f"{MTHREADS_LOG} path={path}"]
    assert path in MTHREADS.PATHS
    assert_backward_matches(got, grad, x, indices)


def test_mthreads_proof_log_names_the_float64_fallback(caplog: pytest.LogCaptureFixture) -> None:
    grad, x, indices = case((1, 2, 8, 8, 8), (4, 4, 4), torch.float64, "fallback")
    with caplog.at_level(logging.DEBUG, logger="kernels.backends._mthreads"):
        got = backward("mthreads")(grad, x, indices)
    assert caplog.messages == [f"{MTHREADS_LOG} path=generic:float64"]
    assert_backward_matches(got, grad, x, indices)


def test_mthreads_falls_back_unless_forced(caplog: pytest.LogCaptureFixture) -> None:
    if DEVICE == "musa":
        pytest.skip("on a MUSA device the Moore Threads kernel is the natural one")
    grad, x, indices = case((1, 2, 8, 8, 8), (4, 4, 4), torch.float32, "unforced")
    with runtime.force("cpu"), caplog.at_level(logging.DEBUG, logger="kernels.backends._mthreads"):
        got = MTHREADS.adaptive_max_pool3d_backward(grad, x, indices)
    assert MTHREADS_LOG not in caplog.text
    assert_backward_matches(got, grad, x, indices)


def test_mthreads_falls_back_past_the_grid_limits(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(MTHREADS, "_GRID_YZ_LIMIT", 0)
    monkeypatch.setattr(MTHREADS, "_PLANS", PlanCache())
    grad, x, indices = case((1, 2, 4, 6, 8), (2, 3, 4), torch.float32, "grid")
    assert MTHREADS.launch_for(problem(grad, x, indices)) is None
    with caplog.at_level(logging.DEBUG, logger="kernels.backends._mthreads"):
        got = backward("mthreads")(grad, x, indices)
    assert caplog.messages == [f"{MTHREADS_LOG} path=generic:grid_limits"]
    assert_backward_matches(got, grad, x, indices)


@pytest.mark.parametrize("vendor", ["cpu", "mthreads"])
def test_autograd_through_use_kernels(vendor: str, caplog: pytest.LogCaptureFixture) -> None:
    """F.adaptive_max_pool3d(...).backward() runs our kernels inside use_kernels().

    The gradient flows in through `(out * grad).sum()`, which hands the pooling's backward
    exactly `grad`: `out.backward(grad)` would make autograd import its symbolic-shape
    checks (sympy), seconds of a GPU job for nothing this test is about."""
    gen = seeded("autograd", vendor)
    x64 = torch.randn((2, 3, 7, 9, 10), generator=gen, dtype=torch.float64)
    grad = torch.randn((2, 3, 3, 4, 4), generator=gen, dtype=torch.float64)
    x_ref = x64.clone().requires_grad_()
    (F.adaptive_max_pool3d(x_ref, (3, 4, 4), return_indices=True)[0] * grad).sum().backward()

    x = x64.float().to(DEVICE).requires_grad_()
    with (
        runtime.force(vendor),
        kernels.use_kernels(),
        caplog.at_level(logging.DEBUG, logger="kernels.backends._mthreads"),
    ):
        out, _ = F.adaptive_max_pool3d(x, (3, 4, 4), return_indices=True)
        (out * grad.float().to(DEVICE)).sum().backward()
    assert not kernels.enabled()
    assert (MTHREADS_LOG in caplog.text) == (vendor == "mthreads")
    assert_close(x.grad.cpu().double(), x_ref.grad, rtol=1e-5, atol=1e-6)


def test_enable_and_disable(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    generic = GENERIC.adaptive_max_pool3d_backward

    def spy(grad: torch.Tensor, x: torch.Tensor, indices: torch.Tensor) -> torch.Tensor:
        calls.append("ours")
        return generic(grad, x, indices)

    monkeypatch.setattr(GENERIC, "adaptive_max_pool3d_backward", spy)
    grad, x, indices = case((1, 2, 6, 6, 6), (3, 3, 3), torch.float32, "enable")
    with runtime.force("cpu"):
        kernels.enable()
        try:
            kernels.enable()  # idempotent
            got = torch.ops.aten.adaptive_max_pool3d_backward(grad, x, indices)
        finally:
            kernels.disable()
        kernels.disable()  # idempotent
        torch.ops.aten.adaptive_max_pool3d_backward(grad, x, indices)
    assert calls == ["ours"]
    assert_backward_matches(got, grad, x, indices)


def _bad(**change: object) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x = torch.randn(1, 2, 4, 4, 4)
    out, indices = torch.ops.aten.adaptive_max_pool3d(x, [2, 2, 2])
    args = {"grad": torch.randn_like(out), "x": x, "indices": indices}
    args.update(change)
    return args["grad"], args["x"], args["indices"]  # type: ignore[return-value]


BAD_BACKWARD = [
    (_bad(indices=torch.zeros(1, 2, 2, 2, 2, dtype=torch.int32)), r"indices of dtype int64"),
    (_bad(grad=torch.randn(1, 1, 2, 2, 2)), r"expected sizes \[1, 2, 2, 2, 2\] for `gradOutput`"),
    (
        _bad(grad=torch.randn(1, 2, 2, 2, 2, dtype=torch.float64)),
        r"expected dtype torch.float32 for `gradOutput`",
    ),
    (_bad(x=torch.randn(2, 4, 4, 4)), r"expected dimensions 4 for `indices`"),
    (_bad(grad=torch.randn(1, 1, 2, 2, 2, 2)), r"Expected 4D or 5D gradOutput"),
    (_bad(x=torch.randn(3, 2, 4, 4, 4)), r"expected sizes \[3, 2, 2, 2, 2\] for `indices`"),
    (_bad(x=torch.ones(1, 2, 4, 4, 4, dtype=torch.int64)), r"not implemented for torch.int64"),
]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize(
    ("args", "match"),
    BAD_BACKWARD,
    ids=["indices-dtype", "grad-shape", "grad-dtype", "rank", "grad-rank", "batch", "x-dtype"],
)
def test_bad_input(
    args: tuple[torch.Tensor, torch.Tensor, torch.Tensor], match: str, impl: str
) -> None:
    with pytest.raises((RuntimeError, NotImplementedError), match=match):
        backward(impl)(*args)


def test_kernels_refuse_what_they_cannot_run() -> None:
    grad, x, indices = case((1, 1, 3, 5, 7), (2, 2, 2), torch.float32, "refuse")
    with pytest.raises(ValueError, match="disjoint kernel needs every axis to divide"):
        GENERIC.adaptive_max_pool3d_backward(grad, x, indices, config=disjoint.Config(4, 8, 1))
    with pytest.raises(ValueError, match="small_input kernel needs windows that tile"):
        GENERIC.adaptive_max_pool3d_backward(grad, x, indices, config=small_input.Config(64, 1))
    grad, x, indices = case((1, 1, 4, 6, 12), (2, 2, 2), torch.float32, "refuse")  # KW = 6
    with pytest.raises(ValueError, match="expand kernel needs 2"):
        run_forced(expand, grad, x, indices)


@pytest.mark.skipif(not ON_GPU, reason="needs a second device type: only a GPU host has one")
def test_mixed_devices() -> None:
    grad, x, indices = case((1, 2, 4, 4, 4), (2, 2, 2), torch.float32, "devices")
    with pytest.raises(RuntimeError, match="one device"):
        backward("generic")(grad, x, indices.cpu())


def test_window_cover_formula() -> None:
    """Input p lies in exactly the windows floor(p·O/I) ≤ o < ceil((p+1)·O/I), and
    max_window bounds both directions, for every size pair up to 24."""
    for i in range(1, 25):
        for o in range(1, 25):
            for p in range(i):
                covering = [q for q in range(o) if window_start(q, i, o) <= p < window_end(q, i, o)]
                first, last = (p * o) // i, -((-(p + 1) * o) // i)
                assert covering == list(range(first, last)), (i, o, p)
                assert len(covering) <= max_window(o, i)
            assert max(window_end(q, i, o) - window_start(q, i, o) for q in range(o)) == (
                max_window(i, o)
            )


def test_runtime_reports_and_forces() -> None:
    assert runtime.implementation(OP).startswith(
        "kernels.backends._mthreads." if runtime.vendor() == "mthreads" else "kernels.ops."
    )
    with runtime.force("mthreads"):
        assert runtime.vendor() == "mthreads"
        assert runtime.implementation(OP) == (
            "kernels.backends._mthreads.ops.adaptive_max_pool3d_backward."
            "adaptive_max_pool3d_backward"
        )
        assert runtime.implementation("adaptive_max_pool3d") == (
            "kernels.ops.adaptive_max_pool3d.adaptive_max_pool3d"
        )
    with runtime.force("nvidia"):
        assert runtime.implementation(OP) == (
            "kernels.ops.adaptive_max_pool3d_backward.adaptive_max_pool3d_backward"
        )
    with pytest.raises(KeyError, match="unknown operator"):
        runtime.implementation("no_such_op")
    with pytest.raises(ValueError, match="unknown vendor"):
        runtime.set_vendor("amd-ish")


@pytest.mark.plumbing
def test_kernels_vendor_environment_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """KERNELS_VENDOR picks the vendor in a fresh process; a bad value is refused.

    Plumbing, not the operator: it starts a Python process importing torch (seconds of a
    GPU job) and no kernel change can fail it, so an operator's job leaves it out."""
    code = f"from kernels import runtime; print(runtime.vendor(), runtime.implementation({OP!r}))"
    env = {**os.environ, "KERNELS_VENDOR": "mthreads", "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [
        "mthreads",
        "kernels.backends._mthreads.ops.adaptive_max_pool3d_backward.adaptive_max_pool3d_backward",
    ]
    monkeypatch.setenv("KERNELS_VENDOR", "nope")
    with pytest.raises(ValueError, match="KERNELS_VENDOR='nope'"):
        runtime._detect_vendor(runtime.device)


WIDE_KERNELS = [*GENERIC_SHAPES, *MTHREADS_SHAPES]


@pytest.mark.parametrize("kernel", WIDE_KERNELS)
def test_64_bit_offsets_path(kernel: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The int64 arithmetic a >2^31-element tensor needs, forced on a small one."""
    for package in (GENERIC, MTHREADS):  # every module of both that decides it
        for name in ("_scatter", "_launch", *KERNELS):
            module = sys.modules.get(f"{package.__name__}.{name}")
            if module is not None and hasattr(module, "fits_int32"):
                monkeypatch.setattr(module, "fits_int32", lambda *values: False)
    shape, output_size = {**GENERIC_SHAPES, **MTHREADS_SHAPES}[kernel][-1]
    grad, x, indices = case(shape, output_size, torch.float16, "wide")
    p = problem(grad, x, indices)
    if kernel == "small_input":  # it has no 64-bit path: the plan must not take it
        assert select(p)[0].name != "small_input"
        return
    module = KERNELS[kernel]
    launch = module.plan(p, module.default(p, current()), current())
    assert getattr(launch, "launch", launch).constants["WIDE"]  # zeroed: a wrapped Launch
    assert_backward_matches(run_forced(module, grad, x, indices), grad, x, indices)


@pytest.mark.gpu
@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.skipif(not big_memory_gpu(24), reason="needs a GPU with 24 GiB free")
def test_past_2_31_elements(impl: str) -> None:
    gen = torch.Generator(device=DEVICE).manual_seed(11)
    x = torch.randn(BIG_SHAPE, generator=gen, dtype=torch.float16, device=DEVICE)
    # Our forward's indices (checked against PyTorch slice by slice in the forward suite): on
    # the H200, PyTorch 2.11's forward of the whole tensor gave one output depth's worth of
    # indices that matched no element.
    _, indices = kernels.adaptive_max_pool3d(x, BIG_OUTPUT)
    assert int(indices[0, 0, -1].min()) >= 2**31
    grad = torch.randn(indices.shape, generator=gen, dtype=torch.float16, device=DEVICE)
    got = backward(impl)(grad, x, indices)
    plane = BIG_SHAPE[3] * BIG_SHAPE[4]
    # Disjoint windows: exactly one element per window receives its (non-zero) gradient.
    assert int(torch.count_nonzero(got)) == int(torch.count_nonzero(grad))
    for od in (0, 100, BIG_OUTPUT[0] - 1):
        start = od * BIG_WINDOW_D
        part = x[:, :, start : start + BIG_WINDOW_D]
        local = indices[:, :, od : od + 1] - start * plane
        want = torch.ops.aten.adaptive_max_pool3d_backward(grad[:, :, od : od + 1], part, local)
        assert torch.equal(got[:, :, start : start + BIG_WINDOW_D], want)


def meta_problem(
    shape: tuple[int, ...], output_size: tuple[int, int, int], dtype: torch.dtype = torch.float32
) -> Any:
    """The problem of a backward of these sizes, with no data (plans only)."""
    out = (*shape[:-3], *output_size)
    return problem(meta(out, dtype), meta(shape, dtype), meta(out, torch.int64))


# The kernel each plan takes (inputs past the small_input limit, where it applies, on
# both heuristics), and the Moore Threads override's.
ROUTES = [
    ((2, 3, 5, 12, 24), (1, 1, 1), "fill_scatter", "fill_scatter"),  # global, windows not 2^k
    ((1, 2, 3, 6, 48), (1, 2, 3), "fill_scatter", "fill_scatter"),  # windows (3, 3, 16)
    ((1, 2, 4, 9, 12), (2, 3, 3), "fill_scatter", "fill_scatter"),  # divisible, windows of 3
    ((1, 2, 16, 8, 16), (7, 4, 4), "fill_scatter", "fill_scatter"),  # overlaps on D only
    ((1, 2, 16, 11, 20), (7, 7, 7), "zeroed_scatter", "zeroed_scatter"),  # every axis
    ((1, 2, 9, 13, 28), (5, 9, 11), "zeroed_scatter", "zeroed_scatter"),  # every axis
    ((2, 64, 3, 4, 5), (2, 3, 4), "fill_scatter", "fill_scatter"),  # ... with 128 planes
    ((1, 2, 4, 6, 5), (4, 4, 9), "zeroed_scatter", "zeroed_scatter"),  # 3 candidates along W
    ((2, 64, 4, 6, 5), (4, 4, 9), "fill_scatter", "fill_scatter"),  # ... with 128 planes
    ((1, 1, 3, 2, 5), (7, 5, 9), "rows", "gather"),  # steep upsampling: many candidates
    ((1, 1, 4, 6, 8), (2, 3, 4), "disjoint", "expand"),  # 2^k windows
    ((1, 1, 4, 6, 24), (2, 3, 2), "fill_scatter", "fill_scatter"),  # divisible, KW = 12
]


@pytest.mark.parametrize("heuristics", ["h200", "interpreter"])
@pytest.mark.parametrize(("shape", "output_size", "generic", "vendor"), ROUTES, ids=str)
def test_routes(
    shape: tuple[int, ...],
    output_size: tuple[int, int, int],
    generic: str,
    vendor: str,
    heuristics: str,
) -> None:
    """The dispatch tables' order: small_input (here switched off by its size limit),
    disjoint, the zeroed scatter where windows overlap on several axes and planes are few,
    fill_scatter where overlaps are bounded, rows (gather for Moore Threads) beyond."""
    h = HEURISTICS[heuristics]
    p = meta_problem(shape, output_size)
    tables = (DISPATCH, MTHREADS.DISPATCH)
    large = {"small_input"}  # as on inputs past its limit
    chosen = [next(r for r in t if r.name not in large and r.when(p, h)).name for t in tables]
    assert chosen == [generic, vendor]


H200_PLANS = [
    ((1, 1, 8, 8, 8), (4, 4, 4), torch.float16, small_input.Config(512, 4)),
    ((2, 3, 16, 16, 16), (8, 8, 8), torch.float32, small_input.Config(512, 4)),
    ((8, 64, 16, 56, 56), (8, 28, 28), torch.float16, disjoint.Config(64, 64, 8)),
    ((8, 64, 16, 56, 56), (1, 1, 1), torch.float16, fill_scatter.Config(50176, 512, 2048, 8)),
    ((8, 64, 16, 56, 56), (1, 1, 1), torch.float32, fill_scatter.Config(8192, 512, 1024, 4)),
    ((8, 64, 16, 56, 56), (7, 7, 7), torch.float16, fill_scatter.Config(50176, 512, 2048, 8)),
    (  # a tile's outputs in one box (6272 elements, 98 outputs)
        (8, 64, 16, 56, 56),
        (7, 7, 7),
        torch.float32,
        fill_scatter.Config(8192, 128, 1024, 16, in_box=True),
    ),
    ((8, 64, 16, 56, 56), (5, 9, 11), torch.float16, fill_scatter.Config(8192, 128, 1024, 4)),
    ((8, 64, 16, 56, 56), (5, 9, 11), torch.float32, fill_scatter.Config(8192, 128, 1024, 4)),
    ((4, 32, 32, 64, 64), (16, 32, 32), torch.bfloat16, disjoint.Config(64, 64, 8)),
    (
        (4, 32, 32, 64, 64),
        (10, 20, 20),
        torch.float16,
        fill_scatter.Config(32768, 256, 2048, 8, rows=16),
    ),
    (
        (4, 32, 32, 64, 64),
        (10, 20, 20),
        torch.float32,
        fill_scatter.Config(16384, 512, 2048, 16, rows=16, in_box=True),
    ),
    ((2, 64, 4, 6, 5), (4, 4, 9), torch.float32, fill_scatter.Config(120, 256, 1024, 4)),
    ((1, 2, 16, 11, 20), (7, 7, 7), torch.float16, zeroed_scatter.Config(512, 4)),
    ((1, 1, 3, 2, 5), (7, 5, 9), torch.float32, rows.Config(2, 8)),
]


@pytest.mark.parametrize(
    ("in_dhw", "out_dhw", "dtype"),
    [
        ((32, 64, 64), (10, 20, 20), torch.float16),  # H and D edges every 16
        ((32, 64, 64), (10, 20, 20), torch.float32),
        ((30, 48, 40), (7, 9, 5), torch.float32),  # H edges every 16, none inside D
        ((48, 64, 40), (15, 20, 9), torch.float32),  # 25 depths fit: one period of 16
        ((16, 56, 56), (5, 9, 11), torch.float16),  # no edge inside H: whole slices
        ((16, 64, 64), (8, 20, 20), torch.float16),  # D windows disjoint: whole slices
        ((9, 20, 6), (4, 10, 3), torch.float64),
    ],
    ids=str,
)
def test_edge_tiles_split_no_window(
    in_dhw: tuple[int, int, int], out_dhw: tuple[int, int, int], dtype: torch.dtype
) -> None:
    """A tile of rows split where H's windows meet edge to edge leaves every H window, and
    every D window where a whole period of D's edges fits, inside one tile; where H has no
    such edge or D's windows do not overlap, the tile is left to `sides`."""
    p = meta_problem((2, 3, *in_dhw), out_dhw, dtype)
    budget = 65536 // p.gin.element_size()
    tile, rows = fill_scatter.edge_tile(p, budget)
    (d, h, w), (od, oh, _) = in_dhw, out_dhw
    h_edges = h // math.gcd(h, oh) < h
    if d % od == 0 or not h_edges:
        assert (tile, rows) == (budget, 0)
        return
    depths, rows_ = fill_scatter.sides(p, tile, rows)
    assert rows == rows_ and tile == depths * rows * w <= budget
    for axis_in, axis_out, band, whole in ((h, oh, rows, True), (d, od, depths, False)):
        period = axis_in // math.gcd(axis_in, axis_out)
        if whole or depths >= period:
            for o in range(axis_out):
                start, end = window_start(o, axis_in, axis_out), window_end(o, axis_in, axis_out)
                assert start // band == (end - 1) // band, (o, start, end, band)


@pytest.mark.parametrize(
    ("in_dhw", "out_dhw", "dtype", "boxed"),
    [
        ((16, 56, 56), (7, 7, 7), torch.float32, True),  # 6272 elements, 128 lanes
        ((16, 56, 56), (7, 7, 7), torch.float16, False),  # never in 2-byte dtypes
        ((16, 56, 56), (5, 9, 11), torch.float32, False),  # 6272 elements, 256 lanes
        ((32, 64, 64), (10, 20, 20), torch.float32, True),  # 16384 elements, 512 lanes
        ((32, 64, 64), (8, 20, 20), torch.float32, True),  # two candidates along H and W only
        ((16, 56, 56), (5, 5, 5), torch.float32, True),  # 6272 elements, 64 lanes
        ((16, 56, 56), (8, 28, 28), torch.float32, False),  # no element with two candidates
        ((16, 56, 5), (7, 7, 9), torch.float32, False),  # three candidates along W
    ],
    ids=str,
)
def test_h200_default_takes_one_box_where_a_lane_has_many_elements(
    in_dhw: tuple[int, int, int], out_dhw: tuple[int, int, int], dtype: torch.dtype, boxed: bool
) -> None:
    """The H200's fill_scatter tiles hold their outputs in one box, with its warps, only in
    4-byte dtypes where no element has more than two candidates along an axis and the tile
    holds `fill_in_box` elements a box lane; the interpreter's never."""
    p = meta_problem((8, 64, *in_dhw), out_dhw, dtype)
    chosen = fill_scatter.default(p, H200)
    walked = fill_scatter.tiles(p, H200, *fill_scatter.default_tile(p, H200))
    assert chosen.in_box == boxed
    if boxed:
        assert chosen == dataclasses.replace(
            fill_scatter.in_one_box(p, walked), num_warps=H200.fill_in_box_warps
        )
        depths, rows_ = fill_scatter.sides(p, chosen.tile, chosen.rows)
        assert depths * rows_ * in_dhw[2] >= H200.fill_in_box[1] * chosen.box
    else:
        assert chosen == walked
    assert not fill_scatter.default(p, HEURISTICS["interpreter"]).in_box


@pytest.mark.parametrize(("shape", "output_size", "dtype", "config"), H200_PLANS, ids=str)
def test_h200_plans(
    shape: tuple[int, ...], output_size: tuple[int, int, int], dtype: torch.dtype, config: Any
) -> None:
    """The kernel and tiles an H200 takes for the benchmark's sizes and a few others: the
    choices its sweeps made."""
    route, chosen = select(meta_problem(shape, output_size, dtype), None, H200)
    assert (route.name, chosen) == (config.kernel, config)
