"""The shared Triton helpers, run as kernels on the test device (the interpreter on a CPU)."""

from __future__ import annotations

import random

import pytest
import torch
import triton
import triton.language as tl

from kernels.ops._adaptive import div_by, divisor
from kernels.ops.adaptive_max_pool3d_backward._scatter import divisor_words
from tests.kernels.support import DEVICE


@triton.jit
def _divide_kernel(x_ptr, table_ptr, out_ptr, d, n, BLOCK: tl.constexpr):
    """out = x // d, the magic numbers read from an int32 table as the scatter kernels do."""
    i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + i, mask=i < n, other=0)
    q = div_by(x, (d, tl.load(table_ptr), tl.load(table_ptr + 1)), False)
    tl.store(out_ptr + i, q, mask=i < n)


@pytest.mark.parametrize("d", [1, 2, 3, 7, 20, 56, 400, 4096, 12345, 2**20 + 1, 2**31 - 1])
def test_div_by_from_the_table(d: int) -> None:
    """Numerators up to 2^31 - 1, where the multiply-high's top bit is set: the magic number
    survives its trip through the int32 table and the shift stays logical."""
    table = torch.tensor(divisor_words((d,)), dtype=torch.int32, device=DEVICE)
    rng = random.Random(d)
    values = [0, 1, d - 1, d, d + 1, 2**31 - 1, 2**31 - 2, 2**30, 2**31 - 1 - (2**31 - 1) % d]
    values += [rng.randrange(2**31) for _ in range(200)]
    x = torch.tensor([v for v in values if 0 <= v < 2**31], dtype=torch.int32, device=DEVICE)
    out = torch.empty_like(x)
    _divide_kernel[(triton.cdiv(x.numel(), 128),)](x, table, out, d, x.numel(), BLOCK=128)
    assert torch.equal(out.cpu().long(), x.cpu().long() // d)


def test_divisor_magic_numbers() -> None:
    """The kernels' multiply-high division agrees with // for every 31-bit numerator class:
    small values, values near multiples of d, and the top of the range."""
    rng = random.Random(5)
    divisors = [*range(1, 300), 4096, 12345, 2**16 + 1, 2**30 - 1, 2**30, 2**31 - 1]
    divisors += [rng.randrange(1, 2**31) for _ in range(200)]
    for d in divisors:
        magic, shift = divisor(d)
        assert 0 < magic < 2**32
        xs = [0, 1, d - 1, d, d + 1, 2**31 - 1, 2**31 - 2, 2**31 - 1 - (2**31 - 1) % d]
        xs += [rng.randrange(2**31) for _ in range(50)]
        xs += [k * d + r for k in (1, 7, 2**31 // d - 1) for r in (-1, 0, 1)]
        for x in (x for x in xs if 0 <= x < 2**31):
            assert (2 * x * magic) >> 32 >> shift == x // d, (x, d)
    with pytest.raises(ValueError, match="outside"):
        divisor(0)
