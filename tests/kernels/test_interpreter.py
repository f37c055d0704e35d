"""The interpreter as `kernels.runtime` sets it up on a CPU: a `@triton.jit` helper called
inside a launch does not re-patch `triton.language` once per program, and computes the same."""

from __future__ import annotations

import pytest
import torch
import triton
import triton.language as tl

from kernels import runtime

pytestmark = pytest.mark.skipif(not runtime.interpreted, reason="only the interpreter patches")


@triton.jit
def _twice(x):
    return x * 2


@triton.jit
def _doubled_kernel(src, dst, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offsets, _twice(tl.load(src + offsets)))


def test_a_helper_does_not_repatch_the_language_per_program(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from triton.runtime import interpreter

    assert getattr(interpreter._patch_lang, "skips_repatching", False)
    scans = []
    original = interpreter._patch_builtin
    monkeypatch.setattr(
        interpreter, "_patch_builtin", lambda *a: scans.append(a[0]) or original(*a)
    )
    src = torch.arange(64, dtype=torch.float32)
    dst = torch.empty_like(src)
    _doubled_kernel[(16,)](src, dst, BLOCK=4)
    assert torch.equal(dst, src * 2)
    per_launch = len(scans)
    scans.clear()
    _doubled_kernel[(1,)](src, dst, BLOCK=4)
    # The launch's own patch, whatever the grid: not one more scan per program's helper call.
    assert 0 < per_launch == len(scans)


def test_numpy_dtypes_come_from_a_table_built_once() -> None:
    """Every Triton type the interpreter holds in NumPy, alone, as a block and as a pointer
    (itself a block's element too), maps as the interpreter's own function maps it."""
    from triton.runtime import interpreter

    ours = interpreter._get_np_dtype
    original = ours.original
    types = [getattr(tl, name) for name in runtime.NP_MAPPED if hasattr(tl, name)]
    assert len(types) >= 13
    for ty in types:
        pointer = tl.pointer_type(ty)
        for each in (ty, tl.block_type(ty, [4]), pointer, tl.block_type(pointer, [2, 8])):
            assert ours(each) == original(each), each
    with pytest.raises(KeyError):  # a type it cannot hold is refused, as before
        ours(tl.void)
