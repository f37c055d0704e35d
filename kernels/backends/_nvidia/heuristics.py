"""The generic kernels' heuristics on a CUDA device, from an H200 sweep scaled by the device.

Counts of programs scale with the multiprocessors: the largest power of two at most the
multiprocessor count (128 on the H200's 132) is where the sweeps put a program a
multiprocessor; the other values are what the sweeps found best on the H200 (the kernel
modules' docstrings and docs/notes/kernel-performance-journal.md give the measurements).
The device's memory size enters no rule: every benchmark size fits many times over.
"""

from __future__ import annotations

from typing import Any

import torch

from kernels.heuristics import Heuristics, pow2_floor


def heuristics() -> Heuristics:
    """The heuristics of the current CUDA device."""
    return for_device(torch.cuda.get_device_properties(torch.cuda.current_device()))


def for_device(properties: Any) -> Heuristics:
    """The heuristics of a device whose properties give `multi_processor_count` (torch's CUDA
    device properties, torch_musa's, or a stand-in in a test)."""
    programs = pow2_floor(int(properties.multi_processor_count))
    return Heuristics(
        # Windows of at most 512 elements take a small-window kernel (lane_window beat the chunked
        # kernel 2.4x at 125-element windows).
        lane_window=512,
        small_window=512,
        # Windows of fewer (D, H) rows leave the column_max kernel's final gather most of the
        # work: (8,64,16,56,56) -> (16,28,20), 2 rows, took 4.7x the floor in fp16 against
        # lane_window's 2.9x; (8,50,50), 4 rows, 4.4x against 5.3x.
        min_column_rows=4,
        # Where column_max does not apply (H windows past 16 rows), window_tile beats
        # lane_window on large windows only (fp16, x the floor): (8,64,16,64,64) -> (4,2,16),
        # 512 elements, 3.18 against 4.80; (8,64,16,96,64) -> (8,4,16), 192, 3.32 against 2.04.
        min_tile_window=256,
        pack_rows=False,
        trim_blocks=False,
        custom_reduce=True,
        # 1024 outputs a program in 2-byte dtypes, 512 in fp32; halved while a launch would
        # have fewer programs than multiprocessors (fp32 (1,1,32,32,32) -> (16,16,16): 16
        # programs of 256 outputs, 1.37x PyTorch; 64 of 64, 2.10x).
        pair_outputs=(1024, 512),
        min_pair_programs=programs,
        # 256 outputs a program: more warps in flight per window element than four a thread.
        lane_outputs=256,
        max_warps=8,
        # (8,64,16,56,56) -> (7,7,7), (5,9,11) and (4,32,32,64,64) -> (10,20,20), windows of
        # 16 and 32 (D, H) rows: 4 rows a program and the whole walk unrolled, 2 columns a
        # thread in 4-byte dtypes (1.74-1.86x the floor, best or within 2% of 4 and 8 rows,
        # 2 and 4 warps, rolled or not) and 4 in 2-byte ones (2.24-2.46x, against 2.41-2.59x
        # for the earlier rule: 8 rows, the depth walk rolled past 16 rows).
        # Walks of 56-128 rows ((8,64,16,56,56) -> (4,4,14), (2,7,7); (4,32,32,64,64) ->
        # (4,8,16), (2,8,16)) unrolled too, with 4 warps: fp32 1.48-1.77x the floor against
        # 1.68-3.75 rolled (the rule before: rolled past 32 rows); fp16/bf16 1.81-2.39 in two
        # passes with 2 columns a thread, against 1.83-2.81 rolled (4 a thread) and 1.99-2.76
        # unrolled with 4. Past 128 rows (not swept) the depth walk stays rolled.
        column_elements=(256, 256),
        column_unroll_steps=(128, 128),
        column_short_walk=32,
        column_per_thread=(4, 2, 4, 2),
        # fp32 walks rolled (past 128 rows; five shapes of 256-512 rows, W of 32-128): four
        # rows and four warps, a warp a row, at or ahead of the rule above on every one
        # (4.79 against 14.32 us, 12.01 against 53.96, 8.04 against 14.33; level where the rule
        # gave the same). On W = 64 eight rows and two warps were faster still (3.54 against
        # 6.94 us) but 1.9-2.8x slower on W = 32: no one columns-a-thread rule fits them.
        column_rolled_wide=(4, 4),
        # Carrying the depth two D windows share (each depth read once) pays in fp32 where
        # the windows read 1.38x the input: (7,7,7) a row and a warp a program, in runs of two
        # windows (a run's first reads its shared depth again, for 4x the programs): 1.55x
        # the floor against 1.60 for whole rows and 1.79 without carrying. On (5,9,11) and
        # (10,20,20) (1.25x) it lost 10-35% in every dtype, in runs of two or three too. In
        # 2-byte dtypes the two-pass walk below beats it on (7,7,7): 1.21-1.27x the row's
        # reach against 1.35-1.39.
        column_carry=(float("inf"), 1.3),
        column_carry_run=2,
        # An unrolled walk in two passes: the columns' maxima (packed 2-byte maxima, no step
        # kept), then each one's first step, the rows kept in registers from the first pass.
        # Over the one-pass walk, x the row's reach: fp16/bf16 (5,9,11) 1.37-1.42 -> 1.24-1.25,
        # (10,20,20) 1.35-1.38 -> 1.21-1.22; fp32 1.22-1.23 -> 1.08-1.18 (sm_90 fp16 (5,9,11):
        # 1512 -> 1184 instructions, 128 -> 96 registers). Not on fp32 walks of 128 rows,
        # whose kept rows no longer fit registers: (2,8,16) 2.12x the floor against 1.77.
        column_two_pass=(128, 64),
        chunk_elements=2048,
        # (8,64,16,56,56) -> (7,7,7): about 2048 elements a load and one warp (3.4x the floor
        # in fp16 and 2.2x in fp32, against 6.7x and 3.3x for lane_window).
        tile_elements=2048,
        tile_warps=1,
        # Global pooling, (8,64,16,56,56) -> (1,1,1): 8 groups of 256 elements a program with 4
        # warps best or within 1% of it in every dtype (2.05x the floor in fp16, 1.65x in
        # fp32; 2048 to 32768 elements a program, 4 or 8 warps: 2.04-2.19x and 1.65-1.77x).
        global_groups=(8, 256, 4),
        # Planes too long for global_groups: 2048 lanes a load with 8 warps; planes split
        # until 16 programs a multiprocessor.
        global_block=2048,
        global_programs=16 * programs,
        global_warps=8,
        # The benchmark's tiny sizes have 512 to 32768 elements; above 64 k the disjoint
        # kernel's coalesced output reads matter more than latency. 512 elements a program
        # (four a thread) was 0-0.1 us ahead of one a thread.
        small_input=65536,
        max_candidates=8,
        many_planes=programs,
        small_block=512,
        backward_elements=4096,
        backward_row_width=128,
        # Overlapping windows of 64 elements or more leave a tile few outputs to walk beside
        # its zeros: 8192 elements a program (more programs than multiprocessors hold at once,
        # so one's zeros overlap another's walk) beat the plane and byte rules by 2-10% on
        # (8,64,16,56,56) -> (7,7,7) and (5,9,11); (10,20,20)'s 33-element windows lose 25%.
        # Since a program's first box of sums overlaps its own zeros, whole planes do better
        # where they fit the plane rule below and a visit checks one neighbour at most (fp16
        # and bf16 (7,7,7): 1.57x the floor against 1.65 for 8192 elements); not with more
        # candidates (fp16 (5,9,11) 1.62 against 1.59).
        fill_sparse=(8192, 64),
        # Else a whole (n, c) plane a program where there are enough planes of at most 128 KB
        # (no output read by two programs; fp16 global pooling's 100 KB planes did best so),
        # else 64 KB tiles (fp16 (10,20,20)'s 256 KB planes, fp32's 512 KB, did best so), cut
        # where windows meet edge to edge where they can be (`fill_scatter.edge_tile`): on
        # (10,20,20) 16 rows of all 32 depths (fp16) or of 16 (fp32), each output visited
        # once, 2.15 against 2.26x the floor (fp16) and 1.60 against 1.70 (fp32).
        plane_bytes=128 * 1024,
        tile_bytes=64 * 1024,
        fill_elements=None,
        # Each output's candidate checks hold registers: with more than two candidates, four
        # outputs a thread took 136 registers, one program a multiprocessor (sm_90); two a
        # thread did best where a program walks a whole plane, with one candidate too (fp16
        # (7,7,7)'s planes: 1.50x the floor against 1.57 with four a thread).
        fill_box_per_warp=(128, 64, 32),
        fill_box=None,
        # A tile's outputs in one box, each output's neighbouring candidates gathered from it
        # (one trip to memory a program, not two a walked box), with 16 warps, in two sweeps
        # (x the floor): fp32 (7,7,7) 1.29 against 1.34 (6272 elements, a box of 128 lanes),
        # (10,20,20) 1.52-1.53 against 1.60 (16384, 512); not where a lane has fewer elements:
        # fp32 (5,9,11) (6272, 256) 1.35 at best against 1.32. In 2-byte dtypes the best box
        # lost or tied: (7,7,7) 1.54 against 1.49, (5,9,11) 1.62 against 1.57, (10,20,20) 2.11
        # against 2.14 (a plane or 64 KB tile, 16 warps: 2.78).
        fill_in_box=(0, 32),
        fill_in_box_warps=16,
        fill_zero_per_warp=256,
        fill_zero_block=None,
        zeroed_block=512,
    )
