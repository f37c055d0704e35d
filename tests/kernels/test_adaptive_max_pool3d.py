"""Accuracy of kernels.adaptive_max_pool3d against PyTorch on the CPU in float64.

Three kinds of test: the upstream shape grid and edge cases through the default plan; each
kernel forced on small shapes, every dtype, with ties and NaN (exactness per kernel); and the
dispatch table's choices for a device the test does not need (plans only, nothing launched).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import kernels
from kernels import dispatch, registry
from kernels.heuristics import Heuristics, current
from kernels.ops._adaptive import Forward, PlanCache, as_5d
from kernels.ops.adaptive_max_pool3d import (
    DISPATCH,
    chunked,
    column_max,
    global_groups,
    global_split,
    lane_window,
    pair_window,
    select,
    window_tile,
)
from tests.kernels.support import (
    ALL_DTYPES,
    BIG_OUTPUT,
    BIG_SHAPE,
    BIG_WINDOW_D,
    DEVICE,
    H200,
    HEURISTICS,
    ON_GPU,
    UPSTREAM_OUTPUTS,
    UPSTREAM_SHAPES,
    assert_forward_matches,
    big_memory_gpu,
    meta,
    randn,
    restrided,
    seeded,
    ties_and_nans,
)

pytestmark = pytest.mark.adaptive_max_pool3d

OP = "adaptive_max_pool3d"
forward = kernels.runtime.function(OP)
MODULE = importlib.import_module(registry.operator(OP).module)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize("output_size", UPSTREAM_OUTPUTS, ids=str)
@pytest.mark.parametrize("shape", UPSTREAM_SHAPES, ids=str)
def test_upstream_shapes(
    shape: tuple[int, ...], output_size: tuple[int, int, int], dtype: torch.dtype
) -> None:
    x = randn(shape, dtype, seeded(shape, output_size, dtype))
    assert_forward_matches(forward(x, output_size), x, output_size)


OTHER_CASES = [
    ((2, 3, 5, 9, 13), (2, 4, 5)),  # non-cubic, nothing divides
    ((1, 2, 6, 4, 11), (4, 7, 3)),  # upsampling along H, overlapping windows elsewhere
    ((1, 1, 3, 2, 5), (7, 5, 9)),  # upsampling on every axis
    ((2, 2, 1, 1, 1), (2, 3, 1)),  # a single input element per plane
    ((1, 3, 17, 33, 65), (1, 1, 1)),  # global pooling over rows past one chunk
    ((1, 1, 4, 70, 300), (2, 3, 2)),  # windows wider than one chunk along W and H
    ((3, 6, 7, 8), (2, 3, 4)),  # unbatched (C, D, H, W)
]
# The dtypes in turn: each shape once, every dtype on some (each kernel takes every dtype
# in test_each_kernel).
OTHER = [(s, o, ALL_DTYPES[i % len(ALL_DTYPES)]) for i, (s, o) in enumerate(OTHER_CASES)]


@pytest.mark.parametrize(("shape", "output_size", "dtype"), OTHER, ids=str)
def test_other_shapes(
    shape: tuple[int, ...], output_size: tuple[int, int, int], dtype: torch.dtype
) -> None:
    x = randn(shape, dtype, seeded(shape, output_size, dtype))
    assert_forward_matches(forward(x, output_size), x, output_size)


# Each kernel forced on small shapes it can take: divisible, non-divisible (one unbatched)
# and, where a kernel takes it, upsampling along W (global pooling: two plane sizes).
DIVISIBLE = ((1, 2, 4, 6, 8), (2, 3, 2))
UNBATCHED = ((2, 5, 6, 9), (2, 4, 4))  # nothing divides
UPSAMPLING = ((2, 3, 4, 5), (2, 2, 7))  # along W
KERNEL_SHAPES: dict[str, list[tuple[tuple[int, ...], tuple[int, int, int]]]] = {
    "global_groups": [((2, 3, 4, 6, 8), (1, 1, 1)), ((3, 9, 10, 11), (1, 1, 1))],
    "global_split": [((2, 3, 4, 6, 8), (1, 1, 1)), ((3, 9, 10, 11), (1, 1, 1))],
    "pair_window": [((2, 3, 4, 6, 8), (2, 3, 4)), ((3, 5, 7, 12), (2, 4, 6))],
    "column_max": [((2, 3, 4, 8, 16), (2, 4, 4)), ((2, 7, 10, 14), (3, 4, 5)), UPSAMPLING],
    "window_tile": [((1, 2, 4, 8, 16), (2, 4, 4)), ((2, 3, 4, 6), (2, 2, 4)), UPSAMPLING],
    "lane_window": [DIVISIBLE, UNBATCHED, ((1, 1, 2, 3, 4), (3, 4, 5))],
    "chunked": [DIVISIBLE, UNBATCHED, ((1, 1, 2, 3, 4), (3, 4, 5))],
}
KERNEL_CASES = [(k, s, o) for k, cases in KERNEL_SHAPES.items() for s, o in cases]


def default_config(name: str, x: torch.Tensor, output_size: tuple[int, int, int]) -> object:
    """Kernel `name`'s default config for `x` on this device, whatever the dispatch picks."""
    problem = Forward.of(as_5d(x), output_size)
    return dispatch.named(DISPATCH, name).kernel.default(problem, current())


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
@pytest.mark.parametrize(("kernel", "shape", "output_size"), KERNEL_CASES, ids=str)
def test_each_kernel(
    kernel: str, shape: tuple[int, ...], output_size: tuple[int, int, int], dtype: torch.dtype
) -> None:
    """Every kernel, forced, gives PyTorch's values and indices: ties, NaN, every dtype."""
    x = ties_and_nans(shape, dtype, seeded(kernel, shape, dtype))
    config = default_config(kernel, x, output_size)
    assert_forward_matches(forward(x, output_size, config=config), x, output_size)


@pytest.mark.parametrize("kernel", [k for k in KERNEL_SHAPES if not k.startswith("global")])
def test_each_kernel_with_other_strides(kernel: str) -> None:
    """The same values laid out with D and W swapped in memory (the global kernels need
    contiguous planes: the dispatch sends other layouts elsewhere)."""
    shape, output_size = KERNEL_SHAPES[kernel][0]
    x = restrided(ties_and_nans(shape, torch.float16, seeded(kernel, "strided")), (-3, -1))
    config = default_config(kernel, x, output_size)
    assert_forward_matches(forward(x, output_size, config=config), x, output_size)


SMALL_TILES = [
    # Windows split over several chunks, and programs that take one output each.
    (chunked.Config(1, 2, 4, 1, 2, 2, 1), (1, 1, 5, 6, 9), (2, 4, 4)),
    (chunked.Config(1, 1, 1, 2, 4, 4, 1), (1, 1, 2, 3, 4), (2, 2, 3)),
    (lane_window.Config(8, 1), (1, 2, 2, 3, 41), (1, 2, 2)),  # rows of 21: past the unroll
    (window_tile.Config(1, 2, 2, 2, 2, 1), (1, 1, 3, 5, 5), (2, 2, 2)),  # H and W chunks
    (window_tile.Config(2, 1, 4, 4, 4, 1), (1, 3, 2, 8, 16), (2, 4, 4)),  # two rows a program
    (window_tile.Config(1, 1, 2, 1, 4, 1), (1, 1, 2, 3, 8), (1, 1, 1)),  # global, in chunks
    (global_groups.Config(4, 16, 1), (2, 3, 5, 6, 7), (1, 1, 1)),  # 14 groups, 4 programs
    (global_groups.Config(2, 8, 2), (2, 3, 5, 6, 7), (1, 1, 1)),  # 27 groups
    (global_split.Config(3, 16, 1), (2, 3, 5, 6, 7), (1, 1, 1)),
    (global_split.Config(7, 32, 2), (2, 3, 5, 6, 7), (1, 1, 1)),
    (column_max.Config(2, 1), (1, 3, 2, 3, 1), (2, 2, 1)),  # rows of one column
    (column_max.Config(4, 2, unroll_d=True), (1, 2, 5, 6, 9), (2, 4, 4)),
    (column_max.Config(4, 2, carry=True), (1, 2, 5, 6, 9), (2, 4, 4)),  # a depth walked once
    (column_max.Config(2, 1, carry=True), (1, 3, 7, 5, 9), (3, 2, 4)),  # ... shared by two
    (column_max.Config(4, 1, carry=True), (1, 2, 4, 6, 9), (7, 3, 4)),  # D upsampled
    (column_max.Config(2, 1, carry=True, run=2), (1, 3, 9, 5, 9), (5, 2, 4)),  # runs of 2
    (column_max.Config(4, 2, carry=True, run=3), (1, 2, 4, 6, 16), (7, 3, 4)),  # ... of 3
    # A run whose first window is the widest: [6,10) of 16 depths read whole, nothing carried.
    (column_max.Config(2, 1, carry=True, run=3), (1, 2, 16, 4, 8), (7, 2, 4)),
    (pair_window.Config(1, 2, 4, 1), (1, 1, 3, 5, 12), (2, 3, 6)),
]


@pytest.mark.parametrize(("config", "shape", "output_size"), SMALL_TILES, ids=str)
def test_small_tiles(
    config: object, shape: tuple[int, ...], output_size: tuple[int, int, int]
) -> None:
    """Tiles a device would take, smaller than the shape: several chunks, programs and parts,
    with ties across their borders."""
    x = ties_and_nans(shape, torch.float32, seeded(config, shape))
    assert_forward_matches(forward(x, output_size, config=config), x, output_size)


@pytest.mark.parametrize(("unroll_d", "carry"), [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("nan", [False, True], ids=["no NaN", "NaN"])
def test_column_max_windows_of_different_depths(unroll_d: bool, carry: bool, nan: bool) -> None:
    """A program whose rows have D windows of 3 and 4 rows: the rolled walk takes as many
    steps as its longest window, the unrolled one all of them, clamped; the carrying walk
    reads each depth once, the one two windows share seeding the second (without NaN its
    own answer; with NaN the window walked again)."""
    shape, output_size = (1, 2, 8, 6, 16), (3, 3, 4)  # D windows of 3, 4 and 3 rows
    gen = seeded("depths", unroll_d, carry, nan)
    x = ties_and_nans(shape, torch.float16, gen) if nan else randn(shape, torch.float16, gen)
    if not nan:
        x[..., 1::2, :] = x[..., 1::2, :].round()  # ties, across the shared depths too
    config = column_max.Config(4, 2, unroll_d, carry)
    assert_forward_matches(forward(x, output_size, config=config), x, output_size)


@pytest.mark.parametrize(("unroll_d", "carry"), [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize(
    ("shape", "output_size"), [((1, 2, 8, 12, 16), (3, 2, 4)), ((1, 3, 7, 9, 10), (2, 2, 3))]
)
def test_column_max_tall_windows_with_ties(
    shape: tuple[int, ...], output_size: tuple[int, int, int], unroll_d: bool, carry: bool
) -> None:
    """H windows of 5-6 rows, few distinct values: ties within every window's rows and
    columns go to the earliest position, in every walk."""
    gen = seeded("tall", shape, unroll_d, carry)
    x = (randn(shape, torch.float16, gen) * 2).round()
    config = column_max.Config(2, 1, unroll_d, carry)
    assert_forward_matches(forward(x, output_size, config=config), x, output_size)


@pytest.mark.parametrize(("unroll_d", "carry"), [(False, False), (True, False), (False, True)])
def test_column_max_infinities(unroll_d: bool, carry: bool) -> None:
    """Infinities of both signs, tied within windows and across the depth two windows share:
    the walks' running maxima start at -inf, so a window of -inf must still give its first
    position, and an inf beats every number without being taken for a NaN."""
    shape, output_size = (2, 2, 8, 6, 16), (3, 3, 4)
    gen = seeded("infinities", unroll_d, carry)
    x = randn(shape, torch.float16, gen)
    x[0, 0, 2:4, :, 3:9] = float("inf")  # ties, the shared depth 2 among them
    x[0, 1] = float("-inf")  # a plane of -inf: the first of each window wins
    x[1, 0, :, 1, ::3] = float("inf")
    config = column_max.Config(4, 2, unroll_d, carry)
    assert_forward_matches(forward(x, output_size, config=config), x, output_size)


# Triton's interpreter compares bf16 as its raw bits (negative values out of order).
BF16_COMPARED = pytest.mark.skipif(not ON_GPU, reason="the interpreter compares bf16 as bits")


@pytest.mark.parametrize(
    "dtype",
    [torch.float16, pytest.param(torch.bfloat16, marks=BF16_COMPARED), torch.float32],
    ids=str,
)
@pytest.mark.parametrize("unroll_d", [False, True], ids=["rolled", "unrolled"])
@pytest.mark.parametrize("nan", [False, True], ids=["no NaN", "NaN"])
def test_column_max_two_passes(unroll_d: bool, nan: bool, dtype: torch.dtype) -> None:
    """Column maxima first, then each column's first step holding its maximum (the rows read
    again last to first): PyTorch's answer with ties inside and across windows, infinities of
    both signs, a plane of -inf and, where there are NaNs, the walk again with them."""
    shape, output_size = (1, 3, 8, 6, 16), (3, 3, 4)  # D windows of 3, 4 and 3 rows
    gen = seeded("two passes", unroll_d, nan, dtype)
    x = ties_and_nans(shape, dtype, gen) if nan else (randn(shape, dtype, gen) * 2).round()
    x[0, 0, 2:4, :, 3:9] = float("inf")
    x[0, 1] = float("-inf")
    config = column_max.Config(4, 2, unroll_d, two_pass=True)
    assert_forward_matches(forward(x, output_size, config=config), x, output_size)


@pytest.mark.parametrize("output_w", [6, 7], ids=["tiling", "gathered"])
@pytest.mark.parametrize("walk", ["one pass", "carry", "two passes"])
def test_column_max_merges_columns_in_place_or_gathered(output_w: int, walk: str) -> None:
    """W windows of 4 columns edge to edge (24 -> 6) are reduced where they lie, others (24 ->
    7) gathered: PyTorch's values and indices either way, with ties, NaNs and infinities in
    the same windows (a NaN beats an inf, the last NaN the others)."""
    shape, output_size = (1, 3, 5, 7, 24), (3, 4, output_w)
    x = ties_and_nans(shape, torch.float32, seeded("merge", output_w, walk))
    x[0, 0, :, :, 2:11] = float("inf")
    x[0, 2, :, 3] = float("-inf")
    config = {
        "one pass": column_max.Config(4, 2),
        "carry": column_max.Config(2, 1, carry=True),
        "two passes": column_max.Config(4, 2, True, two_pass=True),
    }[walk]
    assert_forward_matches(forward(x, output_size, config=config), x, output_size)


def test_column_max_knows_which_w_windows_tile_a_row() -> None:
    assert column_max.tiles_row(24, 6)  # 4 columns a window
    assert column_max.tiles_row(56, 7)
    assert column_max.tiles_row(8, 8)  # a column a window
    assert not column_max.tiles_row(48, 8)  # 6 columns: not a power of two
    assert not column_max.tiles_row(56, 11)  # overlapping windows
    assert not column_max.tiles_row(4, 8)  # upsampled


def test_column_max_carry_counts_the_depths_a_window_adds() -> None:
    """Consecutive windows share at most one depth: (7,7,7)'s windows of 16 add 2-3 each."""
    assert column_max.new_depths(16, 7) == 3  # [0,3) [2,5) [4,7) [6,10) [9,12) ...
    assert column_max.new_depths(16, 5) == 4  # [0,4) [3,7) ...
    assert column_max.new_depths(8, 8) == 1
    assert column_max.new_depths(4, 7) == 1  # upsampled: [0,1) [0,2) [1,3) ...
    assert column_max.new_depths(9, 2) == 5  # [0,5) [4,9)
    assert column_max.new_depths(16, 7, run=2) == 3  # runs start at [0,3) [4,7) [9,12) ...
    assert column_max.new_depths(16, 7, run=3) == 4  # ... the second at [6,10), read whole
    assert column_max.depth_reads(16, 7) == 22 / 16  # what the carrying walk saves
    assert column_max.depth_reads(16, 5) == 20 / 16
    assert column_max.depth_reads(16, 8) == 1.0


def test_column_max_carry_walks_every_depth_of_every_window() -> None:
    """The carrying walk's NEW steps reach every window's end, for every size, output size
    and run the kernel may get: a window starts past the depth it shares with the previous
    one of its run (`first` in `column_sweep_kernel`) and reads up to NEW depths from there."""
    for in_size in range(1, 41):
        for out_size in range(1, 41):
            for run in range(0, 6):
                new = column_max.new_depths(in_size, out_size, run)
                prev_end = 0
                for o in range(out_size):
                    if run and o % run == 0:
                        prev_end = 0
                    start = o * in_size // out_size
                    end = -(-(o + 1) * in_size // out_size)
                    first = start + (1 if start < prev_end else 0)
                    assert first + new >= end, (in_size, out_size, run, o)
                    prev_end = end


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


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
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
            lambda: forward(torch.randn(1, 2, 4, 4, 4), 1.5),
            TypeError,
            r"output_size must be an int or a sequence of three, got 1.5",
        ),
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
        "scalar-float-size",
        "dtype",
        "not-a-tensor",
    ],
)
def test_bad_input(make: Callable[[], object], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        make()


def test_kernels_refuse_what_they_cannot_run() -> None:
    x = randn((1, 1, 2, 40, 4), torch.float32, seeded("refuse"))
    with pytest.raises(ValueError, match="column_max kernel does not take windows"):
        forward(x, (1, 2, 2), config=column_max.Config(1, 1))
    # More warps than rows: Triton 3.6 cannot keep the final gather inside a warp.
    with pytest.raises(ValueError, match="needs num_warps <= rows"):
        forward(x, (1, 8, 2), config=column_max.Config(2, 4))
    with pytest.raises(ValueError, match="carrying column_max walk takes one pass"):
        forward(x, (1, 8, 2), config=column_max.Config(2, 1, carry=True, two_pass=True))
    with pytest.raises(ValueError, match="pair_window kernel needs W = 2·OW"):
        forward(x, (1, 8, 1), config=pair_window.Config(1, 1, 1, 1))
    with pytest.raises(ValueError, match="global_groups kernels need global pooling"):
        forward(x, (1, 8, 1), config=global_groups.Config(1, 16, 1))
    with pytest.raises(ValueError, match="global_split kernels need global pooling"):
        forward(x, (1, 8, 1), config=global_split.Config(0, 16, 1))


def test_use_kernels_routes_torch_through_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, ...]] = []
    generic = MODULE.adaptive_max_pool3d

    def spy(input: torch.Tensor, output_size: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        calls.append(tuple(input.shape))
        return generic(input, output_size)

    monkeypatch.setattr(MODULE, "adaptive_max_pool3d", spy)
    x = randn((2, 3, 7, 9, 8), torch.float32, seeded("use"))
    with kernels.use_kernels():
        got = F.adaptive_max_pool3d(x, (3, 4, 3), return_indices=True)
    assert calls == [(2, 3, 7, 9, 8)]
    assert_forward_matches(got, x, (3, 4, 3))
    F.adaptive_max_pool3d(x, (3, 4, 3), return_indices=True)
    assert len(calls) == 1, "PyTorch's kernel must be back after use_kernels()"
    assert not kernels.enabled()


@pytest.mark.parametrize("kernel", list(KERNEL_SHAPES))
def test_64_bit_offsets_path(kernel: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The int64 arithmetic a >2^31-element tensor needs, forced on a small one."""
    module = dispatch.named(DISPATCH, kernel).kernel
    monkeypatch.setattr(module, "fits_int32", lambda *values: False, raising=False)
    monkeypatch.setattr(chunked, "fits_int32", lambda *values: False)  # the shared bound
    monkeypatch.setattr(MODULE, "_PLANS", PlanCache())  # no plan made with 32-bit offsets
    shape, output_size = KERNEL_SHAPES[kernel][0]
    x = ties_and_nans(shape, torch.float16, seeded(kernel, "wide"))
    config = default_config(kernel, x, output_size)
    launch = MODULE.launch_for(as_5d(x), output_size, config)
    assert getattr(launch, "parts", launch).constants["WIDE"]
    assert_forward_matches(forward(x, output_size, config=config), x, output_size)


def test_column_max_runs_fit_a_grid() -> None:
    """Runs of windows take the grid's second axis, which holds at most 65535 programs: runs
    grow where the output depth would pass it, and a run of all windows needs none."""
    p = Forward.of(meta((1, 1, 140000, 4, 4), torch.float32), (70000, 2, 2))
    launch = column_max.plan(p, column_max.Config(1, 1, carry=True, run=1), H200)
    assert launch.grid == (2, 35000) and launch.constants["RUN"] == 2
    whole = column_max.plan(p, column_max.Config(1, 1, carry=True, run=70000), H200)
    assert whole.grid == (2, 1) and whole.constants["RUN"] == 0


def test_column_max_carry_64_bit_offsets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The carrying walk's int64 arithmetic, forced on a small tensor."""
    monkeypatch.setattr(column_max, "fits_int32", lambda *values: False)
    monkeypatch.setattr(MODULE, "_PLANS", PlanCache())  # no plan made with 32-bit offsets
    shape, output_size = (1, 2, 7, 6, 16), (3, 3, 4)
    x = ties_and_nans(shape, torch.float16, seeded("carry", "wide"))
    config = column_max.Config(4, 2, carry=True, run=2)  # a run of two windows, then one
    assert MODULE.launch_for(as_5d(x), output_size, config).constants["WIDE"]
    assert_forward_matches(forward(x, output_size, config=config), x, output_size)


# What the dispatch table picks, and the tiles, for the benchmark's sizes and a few others;
# on the H200 these are the choices its sweeps made (the interpreter's tiles differ).
H200_PLANS = [
    ((1, 1, 8, 8, 8), (4, 4, 4), torch.float16, pair_window.Config(1, 4, 4, 1)),
    ((2, 3, 16, 16, 16), (8, 8, 8), torch.float32, pair_window.Config(1, 8, 8, 1)),
    ((1, 1, 32, 32, 32), (16, 16, 16), torch.float16, pair_window.Config(1, 4, 16, 1)),
    ((2, 8, 8, 8, 8), (4, 4, 4), torch.bfloat16, pair_window.Config(1, 4, 4, 1)),
    ((8, 64, 16, 56, 56), (8, 28, 28), torch.float16, pair_window.Config(1, 32, 32, 8)),
    ((8, 64, 16, 56, 56), (8, 28, 28), torch.float32, pair_window.Config(1, 16, 32, 4)),
    ((8, 64, 16, 56, 56), (1, 1, 1), torch.float16, global_groups.Config(8, 256, 4)),
    ((4, 4, 32, 256, 512), (1, 1, 1), torch.float32, global_split.Config(0, 2048, 8)),
    ((8, 64, 16, 56, 56), (7, 7, 7), torch.float16, column_max.Config(4, 2, True, two_pass=True)),
    ((8, 64, 16, 56, 56), (7, 7, 7), torch.float32, column_max.Config(1, 1, carry=True, run=2)),
    ((8, 64, 16, 56, 56), (5, 9, 11), torch.bfloat16, column_max.Config(4, 2, True, two_pass=True)),
    ((8, 64, 16, 56, 56), (5, 9, 11), torch.float32, column_max.Config(4, 4, True, two_pass=True)),
    ((4, 32, 32, 64, 64), (16, 32, 32), torch.float16, pair_window.Config(1, 32, 32, 8)),
    (
        (4, 32, 32, 64, 64),
        (10, 20, 20),
        torch.float16,
        column_max.Config(4, 2, True, two_pass=True),
    ),
    (
        (4, 32, 32, 64, 64),
        (10, 20, 20),
        torch.float32,
        column_max.Config(4, 4, True, two_pass=True),
    ),
    # walks of 64 and 128 rows unrolled: two passes but for fp32's 128; 2-byte 4 warps
    ((4, 32, 32, 64, 64), (4, 8, 16), torch.float16, column_max.Config(4, 4, True, two_pass=True)),
    ((8, 64, 16, 56, 56), (2, 7, 7), torch.float32, column_max.Config(4, 4, True, two_pass=True)),
    ((4, 32, 32, 64, 64), (2, 8, 16), torch.float32, column_max.Config(4, 4, True)),
    ((4, 32, 32, 64, 64), (2, 8, 16), torch.bfloat16, column_max.Config(4, 4, True, two_pass=True)),
    # fp32 walks past 128 rows, rolled: four rows and warps whatever W (fp16 keeps the rule)
    ((4, 32, 64, 32, 64), (2, 4, 64), torch.float32, column_max.Config(4, 4)),
    ((4, 32, 64, 16, 32), (2, 1, 32), torch.float32, column_max.Config(4, 4)),
    ((2, 16, 64, 32, 128), (1, 8, 128), torch.float32, column_max.Config(4, 4)),
    ((4, 32, 64, 16, 32), (2, 1, 32), torch.float16, column_max.Config(8, 2)),
    ((8, 64, 16, 56, 56), (16, 28, 20), torch.float16, lane_window.Config(256, 8)),  # 2 rows
    ((8, 64, 16, 64, 64), (4, 2, 16), torch.float16, window_tile.Config(1, 1, 32, 16, 4, 1)),
    ((8, 64, 16, 96, 64), (8, 4, 16), torch.float16, lane_window.Config(256, 8)),  # 192
    ((1, 1, 2, 2, 300), (1, 1, 100), torch.float32, lane_window.Config(256, 8)),  # W > 256
    ((2, 4, 16, 24, 24), (2, 2, 3), torch.float32, chunked.Config(1, 1, 2, 8, 16, 8, 8)),
]


@pytest.mark.parametrize(("shape", "output_size", "dtype", "config"), H200_PLANS, ids=str)
def test_h200_plans(
    shape: tuple[int, ...], output_size: tuple[int, int, int], dtype: torch.dtype, config: object
) -> None:
    route, chosen, _ = select(meta(shape, dtype), output_size, None, H200)
    assert (route.name, chosen) == (config.kernel, config)  # type: ignore[attr-defined]


# (shape, output size, strided, the kernel on a device and under the interpreter)
ROUTES = [
    ((1, 1, 4, 4, 8), (2, 2, 4), False, "pair_window"),
    ((1, 1, 4, 4, 9), (2, 2, 3), False, "column_max"),
    ((1, 2, 4, 4, 16), (2, 2, 4), False, "column_max"),  # aligned W windows of 4 too
    ((1, 2, 4, 4, 16), (2, 2, 4), True, "column_max"),
    ((1, 1, 4, 34, 16), (1, 2, 4), False, "window_tile"),  # H windows of 17, 272 elements
    ((1, 1, 1, 34, 16), (1, 2, 4), False, "lane_window"),  # ... 68 (chunked if interpreted)
    ((1, 1, 1, 34, 2), (1, 2, 2), False, "lane_window"),  # W windows of 1
    ((1, 1, 2, 4, 9), (2, 2, 3), False, "lane_window"),  # windows of 2 (D, H) rows
    ((1, 1, 2, 2, 300), (1, 1, 100), False, "lane_window"),  # rows of more than 256 columns
    ((1, 2, 8, 8, 16), (1, 1, 1), False, "global_groups"),  # contiguous planes
    ((1, 2, 32, 256, 512), (1, 1, 1), False, "global_split"),  # ... of over 4096 groups
    ((1, 2, 8, 8, 16), (1, 1, 1), True, "chunked"),  # strided planes, 1024-element windows
]


@pytest.mark.parametrize("heuristics", ["h200", "interpreter"])
@pytest.mark.parametrize(("shape", "output_size", "strided", "kernel"), ROUTES, ids=str)
def test_routes(
    shape: tuple[int, ...],
    output_size: tuple[int, int, int],
    strided: bool,
    kernel: str,
    heuristics: str,
) -> None:
    """The dispatch table's order: global_groups for contiguous planes (global_split where
    they hold more groups than its merge takes at once); for windows of up to
    512 elements pair_window where W = 2·OW, column_max on rows of up to 256 columns with
    windows of at least 4 (D, H) rows, at most 16 along H, window_tile where windows of 256
    or more divide W into aligned power-of-two widths, lane_window; else chunked. Under the
    interpreter the window-walking kernels take windows of up to 32 elements only."""
    h: Heuristics = HEURISTICS[heuristics]
    x = restrided(meta(shape), (1, -1)) if strided else meta(shape)
    route, _, problem = select(x, output_size, None, h)
    small_only = kernel in ("lane_window", "pair_window") and problem.elements > h.lane_window
    assert route.name == ("chunked" if small_only else kernel)


def test_pair_window_tiles_shrink_for_few_outputs() -> None:
    """On the H200 the pair_window tile halves (down to 64 outputs) until the launch has a
    program per multiprocessor (128); the benchmark's large rows keep the swept tiles."""

    def outputs_a_program(shape: tuple[int, ...], output_size: tuple[int, int, int]) -> int:
        config = pair_window.default(Forward.of(meta(shape), output_size), H200)
        return config.boh * config.bow

    assert H200.min_pair_programs == 128
    assert outputs_a_program((1, 1, 32, 32, 32), (16, 16, 16)) == 64
    assert outputs_a_program((1, 1, 64, 64, 64), (32, 32, 32)) == 256  # halved once
    assert outputs_a_program((8, 64, 16, 56, 56), (8, 28, 28)) == 512


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


@pytest.mark.parametrize(("heuristics", "combine"), [("h200", True), ("interpreter", False)])
def test_global_groups_combines_maxima_in_one_reduction_on_a_device(
    heuristics: str, combine: bool
) -> None:
    """On a device the group maxima take one NaN-propagating reduction; under the
    interpreter, which runs a custom combine element by element, tl.max and a NaN count."""
    h: Heuristics = HEURISTICS[heuristics]
    p = Forward.of(meta((2, 3, 16, 56, 56)), (1, 1, 1))
    launch = global_groups.plan(p, global_groups.default(p, h), h)
    assert launch.parts.constants["COMBINE"] is combine
