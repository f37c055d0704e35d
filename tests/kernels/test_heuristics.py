"""The heuristics each vendor's module builds: on an H200 the values its sweeps chose, and the
same plans (the forward and backward suites check the plans)."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest

from kernels import runtime
from kernels.backends._cpu.heuristics import INTERPRETER
from kernels.backends._mthreads import heuristics as mthreads
from kernels.backends._nvidia.heuristics import for_device
from kernels.heuristics import current, pow2_floor
from tests.kernels.support import H200

pytestmark = [pytest.mark.adaptive_max_pool3d, pytest.mark.adaptive_max_pool3d_backward]


def test_an_h200_gets_the_values_its_sweeps_chose() -> None:
    """132 multiprocessors: 128 programs where a rule wants one a multiprocessor."""
    assert dataclasses.asdict(H200) == {
        "lane_window": 512,  # SMALL_WINDOW
        "small_window": 512,
        "min_column_rows": 4,  # MIN_COLUMN_ROWS
        "min_tile_window": 256,  # MIN_TILE_WINDOW
        "pack_rows": False,
        "trim_blocks": False,
        "custom_reduce": True,
        "pair_outputs": (1024, 512),
        "min_pair_programs": 128,  # MIN_PAIR_PROGRAMS
        "lane_outputs": 256,
        "max_warps": 8,
        "column_elements": (256, 256),
        "column_unroll_steps": (128, 128),
        "column_short_walk": 32,
        "column_per_thread": (4, 2, 4, 2),
        "column_rolled_wide": (4, 4),
        "column_carry": (float("inf"), 1.3),
        "column_carry_run": 2,
        "column_two_pass": (128, 64),
        "chunk_elements": 2048,
        "tile_elements": 2048,
        "tile_warps": 1,
        "global_groups": (8, 256, 4),
        "global_block": 2048,
        "global_programs": 2048,  # TARGET_PROGRAMS
        "global_warps": 8,
        "small_input": 65536,  # SMALL_INPUT: 64 k elements
        "max_candidates": 8,  # MAX_CANDIDATES
        "many_planes": 128,  # MANY_PLANES
        "small_block": 512,
        "backward_elements": 4096,
        "backward_row_width": 128,
        "plane_bytes": 128 * 1024,  # PLANE_BYTES
        "tile_bytes": 64 * 1024,  # TILE_BYTES
        "fill_sparse": (8192, 64),
        "fill_elements": None,
        "fill_box_per_warp": (128, 64, 32),
        "fill_box": None,
        "fill_in_box": (0, 32),
        "fill_in_box_warps": 16,
        "fill_zero_per_warp": 256,
        "fill_zero_block": None,
        "zeroed_block": 512,
    }


@pytest.mark.parametrize(("multiprocessors", "programs"), [(132, 128), (108, 64), (80, 64), (1, 1)])
def test_program_counts_scale_with_the_multiprocessors(multiprocessors: int, programs: int) -> None:
    h = for_device(SimpleNamespace(multi_processor_count=multiprocessors))
    assert (h.min_pair_programs, h.many_planes, h.global_programs) == (
        programs,
        programs,
        16 * programs,
    )
    assert dataclasses.replace(h, min_pair_programs=128, many_planes=128, global_programs=2048) == (
        H200
    )


def test_pow2_floor() -> None:
    assert [pow2_floor(n) for n in (0, 1, 2, 3, 4, 132, 256, 257)] == [1, 1, 2, 2, 4, 128, 256, 256]


def test_the_interpreter_takes_few_large_programs() -> None:
    assert INTERPRETER.pack_rows and INTERPRETER.trim_blocks and INTERPRETER.max_warps == 1
    assert not INTERPRETER.custom_reduce
    assert INTERPRETER.lane_window == 32  # the window-walking kernels loop in Python
    if runtime.interpreted:
        assert current() is INTERPRETER


def test_the_moore_threads_override_keeps_its_own_tiles() -> None:
    assert mthreads.tile(16, 56, 56, mthreads.DEVICE) == mthreads.Tile(1, 64, 64, 8)
    assert mthreads.tile(16, 56, 56, mthreads.INTERPRETER) == mthreads.Tile(8, 64, 64, 1)
    assert mthreads.tile(1, 3, 300, mthreads.DEVICE) == mthreads.Tile(1, 4, 128, 2)
