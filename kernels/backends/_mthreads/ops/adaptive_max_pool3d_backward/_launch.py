"""The launch both kernels of the Moore Threads backward share: a 2-D grid of ((plane, depth
block), block of H·W), the arguments in their common order, 64-bit offsets where needed."""

from __future__ import annotations

from typing import Any

import triton

from kernels.backends._mthreads.heuristics import Tile
from kernels.launch import Launch
from kernels.ops._adaptive import Backward, fits_int32, span


def launch(p: Backward, cfg: Tile, kernel: Any, vec: int, constants: dict[str, Any]) -> Launch:
    """The launch both override kernels share: a 2-D grid of ((plane, depth block), block of
    H·W), the arguments in their common order."""
    grad5, idx5, gin5 = p.grad, p.idx, p.gin
    n, c, d, h, w = gin5.shape
    od, oh, ow = p.out_dhw
    bd, bh, bw = cfg.bd, cfg.bh, cfg.bw
    n_w_blocks = triton.cdiv(w, bw)
    d_blocks = triton.cdiv(d, bd)
    reach = max(
        span(t.shape[2:], t.stride()[2:])
        + sum(b * abs(s) for b, s in zip((bd, bh, bw), t.stride()[2:], strict=True))
        for t in (grad5, idx5, gin5)
    )
    wide = not fits_int32(
        reach,
        (d + bd) * (h + bh) * (w + bw),
        (d + bd + 1) * od,
        (h + bh + 1) * oh,
        (w + bw + 1) * ow,
    )
    son, soc, sod, soh, sow = gin5.stride()
    scalars = (
        c,
        d,
        h,
        w,
        w // vec,
        h * w,
        od,
        oh,
        ow,
        grad5.stride(),
        idx5.stride(),
        son // vec,
        soc // vec,
        sod // vec,
        soh // vec,
        sow,
        d_blocks,
        n_w_blocks,
    )
    constants = {"BD": bd, "BH": bh, "BW": bw, **constants, "VEC": vec, "WIDE": wide}
    constants["num_warps"] = cfg.num_warps
    grid = (n * c * d_blocks, triton.cdiv(h, bh) * n_w_blocks)
    return Launch(kernel, grid, scalars, constants)
