"""The generic kernels' heuristics under Triton's interpreter: fixed, and large.

Each program costs Python time whatever its size, and so does each masked lane, so programs
take as much as fits, up to the problem's size (several (plane, od) rows, tens of thousands of
elements, blocks trimmed to what the problem has), and the kernels that walk a window element
by element in Python (pair_window, lane_window) only take windows of up to 32 elements. The
dispatch thresholds that do not depend on speed are the device's, so the interpreter runs the
same kernels a GPU would on most shapes.
"""

from __future__ import annotations

from kernels.heuristics import Heuristics


def heuristics() -> Heuristics:
    """The interpreter's heuristics."""
    return INTERPRETER


INTERPRETER = Heuristics(
    lane_window=32,
    small_window=512,
    min_column_rows=4,
    min_tile_window=256,
    pack_rows=True,
    trim_blocks=True,
    custom_reduce=False,
    pair_outputs=(16384, 16384),
    min_pair_programs=0,
    lane_outputs=16384,
    max_warps=1,
    column_elements=(32768, 32768),
    column_unroll_steps=(0, 0),
    column_short_walk=0,
    column_per_thread=(1, 1, 1, 1),
    column_rolled_wide=None,
    column_carry=(float("inf"), float("inf")),  # a program's windows in turn: Python time
    column_carry_run=0,
    column_two_pass=(0, 0),  # the interpreter compares bf16 as its bits
    chunk_elements=32768,
    tile_elements=4096,
    tile_warps=None,
    global_groups=(64, 512, 8),
    global_block=4096,
    global_programs=2048,
    global_warps=8,
    small_input=65536,
    max_candidates=8,
    many_planes=128,
    small_block=65536,
    backward_elements=32768,
    backward_row_width=1024,
    plane_bytes=128 * 1024,
    tile_bytes=64 * 1024,
    fill_sparse=(65536, 64),
    fill_elements=65536,
    fill_box_per_warp=(512, 512, 512),
    fill_box=4096,
    fill_in_box=(0, 0),
    fill_in_box_warps=4,
    fill_zero_per_warp=1024,
    fill_zero_block=8192,
    zeroed_block=4096,
)
