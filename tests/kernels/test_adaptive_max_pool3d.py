"""Accuracy of kernels.adaptive_max_pool3d against PyTorch on the CPU in float64."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import kernels
from kernels import runtime
from kernels.ops._adaptive import PlanCache, Spatial, max_window
from kernels.ops._forward_columns import ColumnRows, column_rows
from kernels.ops._forward_global import GlobalSplit
from kernels.ops._forward_tiles import TileShape, tile_shape
from kernels.ops.adaptive_max_pool3d import (
    ChunkTiles,
    ForwardConfig,
    LaneBlock,
    PairTiles,
)
from tests.kernels.support import (
    ALL_DTYPES,
    BIG_OUTPUT,
    BIG_SHAPE,
    BIG_WINDOW_D,
    DEVICE,
    UPSTREAM_OUTPUTS,
    UPSTREAM_SHAPES,
    assert_forward_matches,
    big_memory_gpu,
    randn,
    seeded,
)

pytestmark = pytest.mark.adaptive_max_pool3d

forward = runtime.function("adaptive_max_pool3d")


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("output_size", UPSTREAM_OUTPUTS, ids=str)
@pytest.mark.parametrize("shape", UPSTREAM_SHAPES, ids=str)
def test_upstream_shapes(
    shape: tuple[int, ...], output_size: tuple[int, int, int], dtype: torch.dtype
) -> None:
    x = randn(shape, dtype, seeded(shape, output_size, dtype))
    assert_forward_matches(forward(x, output_size), x, output_size)


@pytest.mark.parametrize(
    ("shape", "output_size"),
    [
        ((2, 3, 5, 9, 13), (2, 4, 5)),  # non-cubic, nothing divides
        ((1, 2, 6, 4, 11), (4, 7, 3)),  # upsampling along H, overlapping windows elsewhere
        ((1, 1, 3, 2, 5), (7, 5, 9)),  # upsampling on every axis
        ((2, 2, 1, 1, 1), (2, 3, 1)),  # a single input element per plane
        ((1, 3, 17, 33, 65), (1, 1, 1)),  # global pooling over rows past one chunk
        ((1, 1, 4, 70, 300), (2, 3, 2)),  # windows wider than one chunk along W and H
        ((3, 6, 7, 8), (2, 3, 4)),  # unbatched (C, D, H, W)
    ],
    ids=str,
)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_other_shapes(
    shape: tuple[int, ...], output_size: tuple[int, int, int], dtype: torch.dtype
) -> None:
    x = randn(shape, dtype, seeded(shape, output_size, dtype))
    assert_forward_matches(forward(x, output_size), x, output_size)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
def test_channels_last_3d_input(dtype: torch.dtype) -> None:
    x = randn((2, 5, 6, 7, 9), dtype, seeded("cl", dtype)).to(memory_format=torch.channels_last_3d)
    out, indices = forward(x, (3, 4, 4))
    assert_forward_matches((out, indices), x, (3, 4, 4))
    want, _ = F.adaptive_max_pool3d(x, (3, 4, 4), return_indices=True)
    assert out.stride() == want.stride(), "output memory format differs from PyTorch's"


def test_non_contiguous_input() -> None:
    base = randn((2, 4, 9, 12, 10), torch.float32, seeded("strided"))
    x = base.transpose(2, 4)[:, 1:, ::2]  # permuted, sliced and stepped
    assert not x.is_contiguous()
    assert_forward_matches(forward(x, (3, 2, 4)), x, (3, 2, 4))


def test_output_size_forms() -> None:
    x = randn((1, 2, 6, 8, 10), torch.float32, seeded("forms"))
    assert_forward_matches(forward(x, 3), x, (3, 3, 3))
    out, _ = forward(x, (None, 4, None))
    assert out.shape == (1, 2, 6, 4, 10)
    assert_forward_matches(forward(x, (6, 4, 10)), x, (6, 4, 10))


@pytest.mark.parametrize(
    "dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64], ids=str
)
def test_ties_pick_the_first_maximum(dtype: torch.dtype) -> None:
    gen = seeded("ties", dtype)
    x = torch.randint(0, 3, (2, 3, 9, 10, 11), generator=gen).to(dtype).to(DEVICE)
    assert_forward_matches(forward(x, (4, 3, 5)), x, (4, 3, 5))
    assert_forward_matches(forward(x, (1, 1, 1)), x, (1, 1, 1))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_nan_propagates(dtype: torch.dtype) -> None:
    gen = seeded("nan", dtype)
    x = torch.randn((2, 2, 8, 9, 10), generator=gen, dtype=torch.float64)
    x[torch.rand(x.shape, generator=gen) < 0.03] = float("nan")
    x[0, 0] = float("nan")  # a plane of NaN: the last one wins, as in PyTorch
    x = x.to(dtype).to(DEVICE)
    out, indices = forward(x, (3, 4, 4))
    assert out.isnan().any() and not out.isnan().all()
    assert_forward_matches((out, indices), x, (3, 4, 4))


def test_infinities() -> None:
    x = torch.full((1, 2, 4, 4, 4), float("-inf"), dtype=torch.float32)
    x[0, 1, 3, 3, 3] = float("inf")
    x = x.to(DEVICE)
    out, indices = forward(x, (2, 1, 2))
    assert_forward_matches((out, indices), x, (2, 1, 2))
    assert out[0, 0].eq(float("-inf")).all()


@pytest.mark.parametrize(
    ("shape", "output_size"),
    [((0, 2, 4, 4, 4), (2, 2, 2)), ((0, 4, 4, 4), (2, 2, 2)), ((1, 2, 4, 4, 4), (0, 1, 1))],
    ids=str,
)
def test_empty(shape: tuple[int, ...], output_size: tuple[int, int, int]) -> None:
    x = torch.randn(shape).to(DEVICE)
    out, indices = forward(x, output_size)
    want, want_idx = F.adaptive_max_pool3d(x.cpu(), output_size, return_indices=True)
    assert out.shape == want.shape and indices.shape == want_idx.shape
    assert indices.dtype == torch.int64


def test_deterministic() -> None:
    x = randn((2, 3, 11, 13, 17), torch.float16, seeded("det"))
    first = forward(x, (5, 6, 7))
    second = forward(x, (5, 6, 7))
    assert torch.equal(first[0], second[0]) and torch.equal(first[1], second[1])


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        (
            lambda: forward(torch.randn(2, 3, 4), (1, 1, 1)),
            RuntimeError,
            r"Expected 4D or 5D tensor",
        ),
        (lambda: forward(torch.randn(1, 2, 0, 4, 4), (1, 1, 1)), RuntimeError, r"non-zero size"),
        (
            lambda: forward(torch.randn(2, 0, 4, 4, 4), (1, 1, 1)),
            RuntimeError,
            r"dimension 1 being",
        ),
        (
            lambda: forward(torch.randn(1, 2, 4, 4, 4), (1, 1)),
            RuntimeError,
            r"output_size.size\(\) must be 3",
        ),
        (lambda: forward(torch.randn(1, 2, 4, 4, 4), (-1, 1, 1)), RuntimeError, r"non-negative"),
        (lambda: forward(torch.randn(1, 2, 4, 4, 4), (1.5, 1, 1)), TypeError, r"must hold ints"),
        (
            lambda: forward(torch.ones(1, 2, 4, 4, 4, dtype=torch.int64), 1),
            NotImplementedError,
            r"not implemented for torch.int64",
        ),
        (lambda: forward([1.0, 2.0], 1), TypeError, r"must be a Tensor"),
    ],
    ids=[
        "rank",
        "empty-spatial",
        "empty-channels",
        "output-rank",
        "negative",
        "float-size",
        "dtype",
        "not-a-tensor",
    ],
)
def test_bad_input(make: Callable[[], object], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        make()


def test_use_kernels_routes_torch_through_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, ...]] = []
    generic = kernels.ops.adaptive_max_pool3d

    def spy(input: torch.Tensor, output_size: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        calls.append(tuple(input.shape))
        return generic(input, output_size)

    monkeypatch.setattr(kernels.ops, "adaptive_max_pool3d", spy)
    x = randn((2, 3, 7, 9, 8), torch.float32, seeded("use"))
    with kernels.use_kernels():
        got = F.adaptive_max_pool3d(x, (3, 4, 3), return_indices=True)
    assert calls == [(2, 3, 7, 9, 8)]
    assert_forward_matches(got, x, (3, 4, 3))
    F.adaptive_max_pool3d(x, (3, 4, 3), return_indices=True)
    assert len(calls) == 1, "PyTorch's kernel must be back after use_kernels()"
    assert not kernels.enabled()


@pytest.mark.parametrize(
    "config",
    [
        ChunkTiles(1, 2, 4, 1, 2, 2, 1),
        ChunkTiles(1, 1, 1, 2, 4, 4, 1),
        LaneBlock(8, 1),
    ],
    ids=["small-chunks", "one-output-per-program", "small-window-kernel"],
)
@pytest.mark.parametrize(
    ("shape", "output_size"),
    [
        ((1, 2, 5, 6, 9), (2, 4, 4)),
        ((1, 1, 8, 6, 10), (1, 1, 1)),
        ((1, 1, 2, 3, 4), (3, 4, 5)),
        ((1, 2, 2, 3, 41), (1, 2, 2)),  # rows of 21: past the unrolled width
    ],
    ids=str,
)
def test_device_tiling(
    shape: tuple[int, ...], output_size: tuple[int, int, int], config: ForwardConfig
) -> None:
    """The one-row-per-program tiling of a device, with windows split over several chunks."""
    x = randn(shape, torch.float32, seeded("tiling", shape, output_size))
    x[..., ::3, :, :] = x[..., ::3, :, :].round()  # ties across chunk borders
    assert_forward_matches(forward(x, output_size, config=config), x, output_size)


def assert_matches_with_strides(
    x: torch.Tensor,
    output_size: tuple[int, int, int],
    config: ForwardConfig | None,
    axes: tuple[int, int],
) -> None:
    """The forward under `config` matches PyTorch on `x` and on a copy with the same values
    laid out with `axes` swapped in memory (other strides)."""
    assert_forward_matches(forward(x, output_size, config=config), x, output_size)
    strided = x.transpose(*axes).contiguous().transpose(*axes)
    assert_forward_matches(forward(strided, output_size, config=config), strided, output_size)


def ties_and_nans(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Random values with every other H row rounded (ties inside windows and across chunk
    borders) and 3% NaN, in `dtype` on the test device."""
    x = torch.randn(shape, generator=gen, dtype=torch.float64)
    x[..., ::2, :] = x[..., ::2, :].round()
    x[torch.rand(shape, generator=gen) < 0.03] = float("nan")
    return x.to(dtype).to(DEVICE)


def largest_windows(shape: tuple[int, ...], output_size: tuple[int, int, int]) -> Spatial:
    """The largest window along each of the last three axes."""
    d, h, w = (max_window(i, o) for i, o in zip(shape[-3:], output_size, strict=True))
    return d, h, w


TILE_CASES = [
    *((dtype, None) for dtype in ALL_DTYPES),  # the planned sides
    (torch.float32, TileShape(1, 2, 2, 2, 2, 1)),  # windows split into chunks on H and W
    (torch.bfloat16, TileShape(1, 2, 2, 2, 2, 1)),
    (torch.float16, TileShape(2, 1, 4, 4, 4, 1)),  # two (plane, od) rows per program
]


@pytest.mark.parametrize(("dtype", "sides"), TILE_CASES, ids=str)
@pytest.mark.parametrize(
    ("shape", "output_size"),
    [
        ((1, 2, 5, 6, 9), (2, 4, 4)),  # overlapping windows on every axis
        ((1, 1, 4, 6, 8), (1, 1, 1)),  # global pooling
        ((2, 3, 4, 8, 16), (2, 4, 4)),  # W windows of 4: vector loads
        ((3, 4, 7, 9), (4, 5, 6)),  # unbatched, upsampling along W
    ],
    ids=str,
)
def test_window_tile_kernel(
    shape: tuple[int, ...],
    output_size: tuple[int, int, int],
    dtype: torch.dtype,
    sides: TileShape | None,
) -> None:
    """The window-tile kernel, whole or with windows split over chunks: ties, NaN, strides."""
    x = ties_and_nans(shape, dtype, seeded("tiles", shape, dtype))
    config = sides or tile_shape(largest_windows(shape, output_size), output_size)
    assert_matches_with_strides(x, output_size, config, (-3, -1))


@pytest.mark.parametrize(
    "split",
    [None, GlobalSplit(3, 16, 1), GlobalSplit(7, 32, 2)],
    ids=["planned-split", "three-parts", "seven-parts"],
)
@pytest.mark.parametrize("shape", [(2, 3, 5, 6, 7), (3, 9, 10, 11)], ids=str)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_global_pooling_split(
    shape: tuple[int, ...], dtype: torch.dtype, split: GlobalSplit | None
) -> None:
    """Global pooling split into parts per plane: ties and NaN across part borders."""
    gen = seeded("global", shape, dtype)
    x = torch.randn(shape, generator=gen, dtype=torch.float64).clamp(max=1.0)  # many ties at 1
    x[torch.rand(shape, generator=gen) < 0.01] = float("nan")
    x = x.to(dtype).to(DEVICE)
    assert_forward_matches(forward(x, (1, 1, 1), config=split), x, (1, 1, 1))


@pytest.mark.parametrize(
    "config", [None, ColumnRows(2, 1), ColumnRows(4, 2, unroll_d=True)], ids=str
)
@pytest.mark.parametrize(
    ("shape", "output_size"),
    [
        ((1, 2, 5, 6, 9), (2, 4, 4)),  # overlapping windows on every axis
        ((2, 3, 4, 8, 16), (2, 4, 4)),  # divisible: windows of 2×2×4
        ((2, 2, 7, 10, 14), (3, 4, 5)),  # windows of 3 or 4 on every axis, like 56 -> 11
        ((3, 4, 7, 9), (4, 5, 6)),  # unbatched, upsampling along W
        ((1, 3, 2, 3, 1), (2, 2, 1)),  # rows of one column
    ],
    ids=str,
)
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_column_max_kernel(
    shape: tuple[int, ...],
    output_size: tuple[int, int, int],
    dtype: torch.dtype,
    config: ColumnRows | None,
) -> None:
    """The column-maxima kernel (whole rows, then a gather per window): ties inside and across
    windows, NaN, other strides, rows that do not fill the last program."""
    x = ties_and_nans(shape, dtype, seeded("columns", shape, dtype))
    kd, kh, _ = largest_windows(shape, output_size)
    config = config or column_rows(shape[-1], x.element_size(), kd * kh)
    assert_matches_with_strides(x, output_size, config, (-3, -1))


def test_column_max_kernel_refuses_what_it_cannot_run() -> None:
    x = randn((1, 1, 2, 40, 4), torch.float32, seeded("columns-refuse"))
    with pytest.raises(ValueError, match="column-maxima kernel does not take windows"):
        forward(x, (1, 2, 2), config=ColumnRows(1, 1))
    # More warps than rows: Triton 3.6 cannot keep the final gather inside a warp.
    with pytest.raises(ValueError, match="needs num_warps <= rows"):
        forward(x, (1, 8, 2), config=ColumnRows(2, 4))


def test_64_bit_offsets_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The int64 arithmetic a >2^31-element tensor needs, forced on a small one."""
    module = importlib.import_module("kernels.ops.adaptive_max_pool3d")
    monkeypatch.setattr(module, "fits_int32", lambda *values: False)
    monkeypatch.setattr(module, "_PLANS", PlanCache())  # no plan made with 32-bit offsets
    x = randn((2, 3, 9, 10, 11), torch.float16, seeded("wide"))
    x[0, 1, 2:5] = float("nan")
    assert_forward_matches(forward(x, (4, 3, 5)), x, (4, 3, 5))
    y = x[..., :10]  # windows two wide along W: the whole-row kernel
    assert_forward_matches(forward(y, (4, 3, 5)), y, (4, 3, 5))
    tiles_module = importlib.import_module("kernels.ops._forward_tiles")
    monkeypatch.setattr(tiles_module, "fits_int32", lambda *values: False)
    config = TileShape(1, 2, 2, 2, 2, 1)
    assert_forward_matches(forward(x, (4, 3, 5), config=config), x, (4, 3, 5))
    global_module = importlib.import_module("kernels.ops._forward_global")
    monkeypatch.setattr(global_module, "fits_int32", lambda *values: False)
    split = GlobalSplit(3, 16, 1)
    assert_forward_matches(forward(x, (1, 1, 1), config=split), x, (1, 1, 1))
    columns_module = importlib.import_module("kernels.ops._forward_columns")
    monkeypatch.setattr(columns_module, "fits_int32", lambda *values: False)
    rows = ColumnRows(1, 1)
    assert_forward_matches(forward(x, (4, 3, 5), config=rows), x, (4, 3, 5))


@pytest.mark.parametrize(
    "config",
    [None, PairTiles(1, 2, 4, 1)],
    ids=["default", "several-tiles"],
)
@pytest.mark.parametrize(
    ("shape", "output_size"),
    [((2, 3, 4, 6, 8), (2, 3, 4)), ((1, 2, 5, 7, 12), (3, 4, 6)), ((3, 6, 10, 18), (2, 3, 9))],
    ids=str,
)
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32], ids=str)
def test_pair_windows(
    shape: tuple[int, ...],
    output_size: tuple[int, int, int],
    dtype: torch.dtype,
    config: ForwardConfig | None,
) -> None:
    """Windows two wide along W (whole-row loads split in registers): ties, NaN, strides."""
    gen = seeded("pairs", shape, dtype)
    x = torch.randint(0, 4, shape, generator=gen).to(torch.float64)
    x[torch.rand(shape, generator=gen) < 0.05] = float("nan")
    x = x.to(dtype).to(DEVICE)
    assert_matches_with_strides(x, output_size, config, (-3, -2))


def test_forward_kernel_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default plan takes the whole-row kernel exactly when W = 2·OW, the column-maxima
    kernel for other small windows of at least 4 (D, H) rows (at most 16 along H) on rows of
    up to 256 columns, then the window-tile kernel where windows of 256 elements or more
    divide W into aligned power-of-two widths of 4 or more, the split reduction for global
    pooling of contiguous planes."""
    module = importlib.import_module("kernels.ops.adaptive_max_pool3d")
    seen: list[str] = []

    class Spy(module.Launch):  # type: ignore[name-defined,misc]
        def __init__(self, kernel: Any, *args: Any) -> None:
            seen.append(kernel.fn.__name__)
            super().__init__(kernel, *args)

    monkeypatch.setattr(module, "Launch", Spy)
    for name in ("_forward_tiles", "_forward_global", "_forward_columns"):
        monkeypatch.setattr(importlib.import_module(f"kernels.ops.{name}"), "Launch", Spy)

    def plan(
        shape: tuple[int, ...], output_size: tuple[int, int, int], strided: bool = False
    ) -> None:
        x = randn(shape, torch.float32, seeded("pick"))
        if strided:
            x = x.transpose(1, -1).contiguous().transpose(1, -1)
        module.plan_forward(x, output_size, None)

    plan((1, 1, 4, 4, 8), (2, 2, 4))
    plan((1, 1, 4, 4, 9), (2, 2, 3))
    plan((1, 2, 4, 4, 16), (2, 2, 4))  # aligned W windows of 4: columns beat window tiles
    plan((1, 2, 4, 4, 16), (2, 2, 4), strided=True)
    plan((1, 1, 4, 34, 16), (1, 2, 4))  # H windows of 17 rows, 272 elements: window tiles
    plan((1, 1, 1, 34, 16), (1, 2, 4))  # ... 68: one lane a window (chunks if interpreted)
    plan((1, 1, 1, 34, 2), (1, 2, 2))  # ... W windows of 1: one lane a window
    plan((1, 1, 2, 4, 9), (2, 2, 3))  # windows of 2 (D, H) rows: one lane a window
    plan((1, 1, 2, 2, 300), (1, 1, 100))  # rows of more than 256 columns: one lane a window
    # Global pooling of contiguous planes: the split reduction; of strided ones (windows of
    # more than 512 elements), the chunks.
    plan((1, 2, 8, 8, 16), (1, 1, 1))
    plan((1, 2, 8, 8, 16), (1, 1, 1), strided=True)
    assert seen == [
        "_pair_window_kernel",
        "_column_max_kernel",
        "_column_max_kernel",
        "_column_max_kernel",
        "_window_tile_kernel",
        "_adaptive_max_pool3d_kernel" if runtime.interpreted else "_small_window_kernel",
        "_small_window_kernel",
        "_small_window_kernel",
        "_small_window_kernel",
        "_global_parts_kernel",
        "_global_merge_kernel",
        "_adaptive_max_pool3d_kernel",
    ]


def test_pair_tiles_shrink_for_few_outputs(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a device the whole-row kernel's tile halves (down to 64 outputs) until the launch
    has MIN_PAIR_PROGRAMS programs; the benchmark's large rows keep the swept tiles."""
    monkeypatch.setattr(runtime, "interpreted", False)
    module = importlib.import_module("kernels.ops.adaptive_max_pool3d")

    def outputs_a_program(oh: int, ow: int, element_size: int, outputs: int) -> int:
        tiles = module.pair_tiles(oh, ow, element_size=element_size, outputs=outputs)
        return int(tiles.boh * tiles.bow)

    assert module.MIN_PAIR_PROGRAMS == 128
    assert outputs_a_program(16, 16, 4, 4096) == 64  # (1,1,32,32,32) -> (16,16,16)
    assert outputs_a_program(16, 16, 2, 4096) == 64
    assert outputs_a_program(32, 32, 4, 128 * 256) == 256  # halved once: 128 programs
    assert outputs_a_program(28, 28, 4, 8 * 64 * 8 * 28 * 28) == 512  # large rows: swept tiles
    assert outputs_a_program(28, 28, 2, 8 * 64 * 8 * 28 * 28) == 1024


@pytest.mark.gpu
@pytest.mark.skipif(not big_memory_gpu(24), reason="needs a GPU with 24 GiB free")
def test_past_2_31_elements() -> None:
    gen = torch.Generator(device=DEVICE).manual_seed(7)
    x = torch.randn(BIG_SHAPE, generator=gen, dtype=torch.float16, device=DEVICE)
    assert x.numel() > 2**31
    out, indices = forward(x, BIG_OUTPUT)
    plane = BIG_SHAPE[3] * BIG_SHAPE[4]
    assert int(indices[0, 0, -1].min()) >= 2**31
    for od in (0, 100, BIG_OUTPUT[0] - 1):
        start = od * BIG_WINDOW_D
        part = x[:, :, start : start + BIG_WINDOW_D]
        want, want_idx = F.adaptive_max_pool3d(part, (1, *BIG_OUTPUT[1:]), return_indices=True)
        assert torch.equal(out[:, :, od : od + 1], want)
        assert torch.equal(indices[:, :, od : od + 1], want_idx + start * plane)
