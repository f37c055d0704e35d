"""The tile sweep's own arguments (the sweep itself needs a GPU)."""

from __future__ import annotations

import argparse

import pytest

from kernels.ops._forward_columns import ColumnRows
from kernels.tuning import forward_variants, parse_case


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
    assert isinstance(variants["cols8-w4-d"], ColumnRows) and variants["cols8-w4-d"].unroll_d
    assert "lanes256-w8" in variants and variants["default"] is None
