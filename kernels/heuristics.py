"""The numbers the generic kernels' plans are tuned by: which kernel takes a shape, and its tiles.

One `Heuristics` per process, made by the heuristics module of the vendor whose hardware the
device is (`kernels/backends/_<vendor>/heuristics.py`, a function `heuristics()`): the
`nvidia` one reads the GPU's multiprocessor count and scales the rules an H200 sweep found;
under Triton's interpreter (the `cpu` vendor) the values are fixed, and large (each program
costs Python time whatever its size). Plans read `current()` unless given one, so a test can
plan for a device it does not have (`kernels.backends._nvidia.heuristics.for_device`).

A pair (narrow, wide) holds the value for 2-byte dtypes, then for 4- and 8-byte ones.
"""

from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass

from kernels import registry, runtime


@dataclass(frozen=True)
class Heuristics:
    """Dispatch thresholds and tile sizes of the generic kernels on one device."""

    # Forward, which kernel (in the order of kernels/ops/adaptive_max_pool3d's DISPATCH).
    lane_window: int  # windows of at most this many elements: pair_window or lane_window
    small_window: int  # ... at most this many: column_max or window_tile may take them
    min_column_rows: int  # column_max needs windows of at least this many (D, H) rows
    min_tile_window: int  # window_tile needs windows of at least this many elements
    # Forward tiles.
    pack_rows: bool  # a program takes as many (plane, od) rows as its tile holds (else one),
    # up to the problem's
    trim_blocks: bool  # blocks shrink to the problem (masked lanes cost the interpreter time)
    custom_reduce: bool  # reductions may combine with a jit function (the interpreter runs
    # one element by element: there a kernel reduces with tl.max and friends instead)
    pair_outputs: tuple[int, int]  # pair_window: outputs a program
    min_pair_programs: int  # pair_window: halve the tile (to 64) until this many programs
    lane_outputs: int  # lane_window: outputs a program, one a lane
    max_warps: int  # warps a program, at most, where a rule scales them with the tile
    column_elements: tuple[int, int]  # column_max: input elements a program's rows hold
    column_unroll_steps: tuple[int, int]  # column_max: unroll the D walk up to this many rows
    column_carry: tuple[float, float]  # column_max: a program a (plane, oh) row walking each
    # depth once (a warp) where the D windows read at least this many times the input
    column_carry_run: int  # column_max: windows a carrying program walks in turn (0: all of
    # its row's)
    column_two_pass: tuple[int, int]  # column_max: an unrolled walk of at most this many rows
    # in two passes (the columns' maxima, then the first step holding each; 0: never)
    column_short_walk: int  # column_max: unrolled walks of at most this many rows are short
    column_per_thread: tuple[int, int, int, int]  # column_max: columns a thread, as warps are
    # set (2-byte dtypes: short unrolled walks, longer unrolled ones, rolled; 4- and 8-byte)
    column_rolled_wide: tuple[int, int] | None  # column_max: (rows, warps) a program for 4-
    # and 8-byte dtypes whose depth walk is rolled (None: the rules above)
    chunk_elements: int  # chunked: window elements a step
    tile_elements: int  # window_tile: elements a load
    tile_warps: int | None  # window_tile: warps (None: one per 512 elements, up to 8)
    global_groups: tuple[int, int, int]  # global_groups: (groups a program, group size, warps)
    global_block: int  # global_split: lanes a load
    global_programs: int  # global_split: split planes until about this many programs
    global_warps: int  # global_split: warps a program
    # Backward, which kernel (kernels/ops/adaptive_max_pool3d_backward's DISPATCH).
    small_input: int  # small_input takes inputs of at most this many elements
    max_candidates: int  # the scatters take elements of at most this many candidate outputs
    many_planes: int  # this many (n, c) planes fill the device with a program each
    # Backward tiles.
    small_block: int  # small_input: elements a program
    backward_elements: int  # disjoint and rows: elements of a depth slice a program
    backward_row_width: int  # disjoint and rows: widest tile along W
    fill_sparse: tuple[int, int]  # fill_scatter: (elements a program, where overlapping
    # windows hold at least this many elements on average), before the two rules below
    # (after the plane rule where an element has at most two candidate outputs)
    plane_bytes: int  # fill_scatter: a program a plane, when there are many planes this small
    tile_bytes: int  # fill_scatter: else tiles of this many bytes (half without overlaps)
    fill_elements: int | None  # fill_scatter: elements a program (None: the rules above)
    fill_box_per_warp: tuple[int, int, int]  # fill_scatter: outputs walked at a time, a warp:
    # on tiles whose elements have at most two candidates, on whole planes, on other tiles
    fill_box: int | None  # fill_scatter: outputs walked at a time (None: the rule above)
    fill_in_box: tuple[int, int]  # fill_scatter: the default tile's outputs in one box
    # (`Config.in_box`) where an element has at most two candidates an axis and the tile holds
    # at least this many elements a box lane (2-byte dtypes, wider; 0: never)
    fill_in_box_warps: int  # fill_scatter: warps a program walking its tile in one box
    fill_zero_per_warp: int  # fill_scatter: zeros stored a step, a warp
    fill_zero_block: int | None  # fill_scatter: zeros a step (None: the rule above)
    zeroed_block: int  # zeroed_scatter: outputs a program

    def narrow(self, pair: tuple[int, int], element_size: int) -> int:
        """The value of `pair` for a dtype of `element_size` bytes."""
        return pair[0] if element_size <= 2 else pair[1]


def pow2_floor(n: int) -> int:
    """The largest power of two ≤ n (1 for n ≤ 1)."""
    return 1 << max(0, n.bit_length() - 1)


@functools.cache
def current() -> Heuristics:
    """The heuristics of this process's device, from its vendor's heuristics module."""
    vendor = registry.vendor_of_device(runtime.device)
    module = importlib.import_module(f"{vendor.package}.heuristics")
    made: Heuristics = module.heuristics()
    return made
