"""The tile sweep's arguments and variants (the sweep itself needs a GPU)."""

from __future__ import annotations

import argparse

import pytest
import torch

from kernels.ops.adaptive_max_pool3d import column_max, global_groups, global_split
from kernels.ops.adaptive_max_pool3d_backward import fill_scatter, problem, rows, zeroed_scatter
from tools.tuning import backward_variants, forward_variants, parse_case


def test_a_case_names_a_shape_and_an_output_size() -> None:
    assert parse_case("8,64,16,56,56:8,50,50") == ((8, 64, 16, 56, 56), (8, 50, 50))


@pytest.mark.parametrize(
    "text", ["8,64,16,56:8,50,50", "8,64,16,56,56:8,50", "a:b", "1,1,1,1,0:1,1,1"]
)
def test_a_malformed_case_is_refused_with_the_expected_form(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="N,C,D,H,W:OD,OH,OW"):
        parse_case(text)


def test_small_windows_sweep_the_column_kernel_beside_the_lanes() -> None:
    variants = forward_variants((8, 64, 16, 56, 56), (8, 50, 50))
    unrolled = variants["column_max/8-w4-d"]
    assert isinstance(unrolled, column_max.Config) and unrolled.unroll_d
    assert "lane_window/256-w8" in variants and variants["default"] is None


def test_backward_variants_name_their_kernels() -> None:
    x = torch.empty((8, 64, 16, 56, 56), dtype=torch.float16, device="meta")
    out = torch.empty((8, 64, 5, 9, 11), dtype=torch.float16, device="meta")
    variants = backward_variants(problem(out, x, out.long()))
    assert isinstance(variants["fill_scatter/plane-box512"], fill_scatter.Config)
    assert variants["fill_scatter/plane-box512"].box == 512
    assert isinstance(variants["zeroed_scatter/1024"], zeroed_scatter.Config)
    assert isinstance(variants["rows"], rows.Config) and "disjoint" not in variants


def test_two_pass_walks_are_swept_beside_each_walk_they_change() -> None:
    variants = forward_variants((8, 64, 16, 56, 56), (5, 9, 11))
    two_pass = variants["column_max/4-w2-d-2p"]
    assert two_pass == column_max.Config(4, 2, True, two_pass=True)
    assert not any(name.endswith("-c2-2p") for name in variants)  # carrying walks take one


def test_one_box_variants_hold_every_output_a_tile_meets_where_windows_overlap() -> None:
    x = torch.empty((8, 64, 16, 56, 56), dtype=torch.float16, device="meta")
    out = torch.empty((8, 64, 5, 9, 11), dtype=torch.float16, device="meta")
    p = problem(out, x, out.long())
    variants = backward_variants(p)
    boxed = {name: cfg for name, cfg in variants.items() if "inbox" in name}
    assert {"fill_scatter/inbox", "fill_scatter/inbox-w16", "fill_scatter/8k-inbox"} <= set(boxed)
    for cfg in boxed.values():
        sides = fill_scatter.sides(p, cfg.tile, cfg.rows)
        assert cfg.in_box and cfg.box >= fill_scatter.tile_outputs(p, *sides)
    disjoint_out = torch.empty((8, 64, 8, 28, 28), dtype=torch.float16, device="meta")
    no_overlap = backward_variants(problem(disjoint_out, x, disjoint_out.long()))
    assert not any("inbox" in name for name in no_overlap)


def test_where_the_default_takes_one_box_the_walk_is_swept_beside_it() -> None:
    """On an H200, fp32 (7,7,7)'s default holds a tile's outputs in one box; the sweep's
    tile, box and warp variants stay walks and `fill_scatter/walk` is the default's tiles
    walked, so the sweep still compares the two."""
    from types import SimpleNamespace

    from kernels.backends._nvidia.heuristics import for_device

    h200 = for_device(SimpleNamespace(multi_processor_count=132))
    x = torch.empty((8, 64, 16, 56, 56), dtype=torch.float32, device="meta")
    out = torch.empty((8, 64, 7, 7, 7), dtype=torch.float32, device="meta")
    p = problem(out, x, out.long())
    variants = backward_variants(p, h200)
    assert fill_scatter.default(p, h200).in_box
    walk = variants["fill_scatter/walk"]
    assert walk == fill_scatter.tiles(p, h200, *fill_scatter.default_tile(p, h200))
    assert not walk.in_box and not variants["fill_scatter/w8"].in_box
    assert variants["fill_scatter/inbox"] == fill_scatter.in_one_box(p, walk)  # its 4 warps
    assert variants["fill_scatter/inbox-w16"] == fill_scatter.default(p, h200)
    fp16 = problem(out.half(), x.half(), out.long())
    assert "fill_scatter/walk" not in backward_variants(fp16, h200)  # its default walks


def test_global_pooling_sweeps_both_global_kernels() -> None:
    variants = forward_variants((8, 64, 16, 56, 56), (1, 1, 1))
    assert isinstance(variants["global_groups/8x256-w4"], global_groups.Config)
    assert variants["global_groups/8x256-w4"] == global_groups.Config(8, 256, 4)
    assert isinstance(variants["global_split/p0-b2048-w8"], global_split.Config)
