"""adaptive_max_pool3d_backward for Moore Threads (MUSA): deterministic, one launch, no atomics
(MUSA has none for fp16 and bf16).

The plan takes the first route of DISPATCH whose condition holds: its own expand kernel where
the windows tile the input with power-of-two H and W windows (the seed's fast path), the
generic scatters (shared with `kernels.ops.adaptive_max_pool3d_backward`, chosen between by
the same rule) where windows overlap boundedly, and its own gather kernel for steep
upsampling. Its kernels' tiles are its own (`kernels/backends/_mthreads/heuristics.py`).

Falls back to the generic op for what it does not support: float64 (MUSA has none), devices
other than MUSA unless the mthreads vendor is forced (`kernels.runtime.force`), and grids
past the grid limits. When it runs it logs `KERNELS_MTHREADS ADAPTIVE_MAX_POOL3D_BACKWARD`
at debug level, so a run can prove the specialization was active.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import torch
import triton

from kernels import dispatch, runtime
from kernels.backends._mthreads.heuristics import tile, tiles
from kernels.backends._mthreads.ops.adaptive_max_pool3d_backward import expand, gather
from kernels.dispatch import Route
from kernels.heuristics import current
from kernels.ops import adaptive_max_pool3d_backward as generic
from kernels.ops._adaptive import Backward, PlanCache, check_backward, signature
from kernels.ops.adaptive_max_pool3d_backward import fill_scatter, zeroed_scatter

logger = logging.getLogger(__name__)

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_GRID_YZ_LIMIT = 65535

# The plan takes the first route whose condition holds (past the grid limits: the generic op).
DISPATCH: tuple[Route[Backward], ...] = (
    # Every axis divides, 2^k H and W windows within the tile: outputs repeated in registers.
    Route("expand", lambda p, h: expand.fits(p), expand),
    # Windows that are not powers of two, or overlap boundedly: the generic scatters.
    Route("zeroed_scatter", generic.zeroed_wins, zeroed_scatter),
    Route("fill_scatter", generic.scatters, fill_scatter),
    # Steep upsampling: each element gathers its candidate windows.
    Route("gather", dispatch.always, gather),
)


def supports(grad_output: torch.Tensor, input: torch.Tensor) -> bool:
    """Whether this kernel may run these tensors (else the generic op does)."""
    on_musa = input.device.type == "musa"
    return input.dtype in SUPPORTED_DTYPES and (on_musa or runtime.vendor() == "mthreads")


_PLANS = PlanCache()


def adaptive_max_pool3d_backward(
    grad_output: torch.Tensor, input: torch.Tensor, indices: torch.Tensor
) -> torch.Tensor:
    """Gradient of adaptive_max_pool3d with respect to its input (Moore Threads kernels)."""
    try:
        key: tuple[object, ...] | None = signature(grad_output, input, indices)
    except AttributeError:  # not tensors: the checks below say so
        key = None
    plan = _PLANS.get(key)
    if plan is None:
        check_backward(grad_output, input, indices)
        plan = generic.plan_with(grad_output, input, indices, launch_for) or _FALLBACK
        _PLANS.put(key, plan)
    if plan is _FALLBACK or not supports(grad_output, input):
        return generic.adaptive_max_pool3d_backward(grad_output, input, indices)
    logger.debug("KERNELS_MTHREADS ADAPTIVE_MAX_POOL3D_BACKWARD")
    return plan(grad_output, indices)


def _fallback(grad: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    raise AssertionError("the generic op runs instead")  # never called: a marker


_FALLBACK: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = _fallback


def past_grid_limits(p: Backward) -> bool:
    """Whether the override's grid for this gradient passes the device's grid limits."""
    n, c, d, h, w = p.gin.shape
    sides = tile(d, h, w, tiles())
    blocks = triton.cdiv(h, sides.bh) * triton.cdiv(w, sides.bw)
    return blocks > _GRID_YZ_LIMIT or n * c * triton.cdiv(d, sides.bd) > 2**31 - 1


def select(p: Backward) -> tuple[Route[Backward], object] | None:
    """The route and config the plan takes for problem `p`; None past the grid limits."""
    if past_grid_limits(p):
        return None
    return dispatch.select(DISPATCH, p, current())


def launch_for(p: Backward) -> generic.BackwardLaunch | None:
    """This implementation's launch for problem `p`, or None past the grid limits."""
    chosen = select(p)
    if chosen is None:
        return None
    route, cfg = chosen
    launch: generic.BackwardLaunch = route.kernel.plan(p, cfg, current())
    return launch
