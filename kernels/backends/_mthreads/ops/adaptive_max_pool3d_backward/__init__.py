"""adaptive_max_pool3d_backward for Moore Threads (MUSA): deterministic, one launch, no atomics
(MUSA has none for fp16 and bf16).

The plan takes the first route of DISPATCH whose condition holds: the generic kernel for small
inputs whose windows divide (a launch's latency, whatever the tiles), its own expand kernel where
the windows tile the input with power-of-two H and W windows (the seed's fast path), the
generic scatters (shared with `kernels.ops.adaptive_max_pool3d_backward`, chosen between by
the same rule) where windows overlap boundedly, and its own gather kernel for steep
upsampling. Its kernels' tiles are its own (`kernels/backends/_mthreads/heuristics.py`).

Falls back to the generic op for what it does not support: float64 (MUSA has none), devices
other than MUSA unless the mthreads vendor is forced (`kernels.runtime.force`), and grids
past the grid limits. On MUSA (or forced) every call logs, at debug level, the path it took:
`KERNELS_MTHREADS ADAPTIVE_MAX_POOL3D_BACKWARD path=<name>`, a name of PATHS, so a run proves
which of the specialization's kernels ran, and when the generic op ran in its place.
"""

from __future__ import annotations

import logging

import torch
import triton

from kernels import dispatch, runtime
from kernels.backends._mthreads.heuristics import tile, tiles
from kernels.backends._mthreads.ops.adaptive_max_pool3d_backward import expand, gather
from kernels.dispatch import Route
from kernels.heuristics import current
from kernels.ops import adaptive_max_pool3d_backward as generic
from kernels.ops._adaptive import Backward, PlanCache, backward_signature, check_backward
from kernels.ops.adaptive_max_pool3d_backward import fill_scatter, small_input, zeroed_scatter

logger = logging.getLogger(__name__)

SUPPORTED_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
_GRID_YZ_LIMIT = 65535

PROOF = "KERNELS_MTHREADS ADAPTIVE_MAX_POOL3D_BACKWARD"

# The plan takes the first route whose condition holds (past the grid limits: the generic op).
DISPATCH: tuple[Route[Backward], ...] = (
    # Small inputs whose axes all divide: the generic lane-per-element kernel, as for any
    # vendor (launch latency only; the expand kernel's tiles cost a few tenths of a µs more).
    Route(
        "small_input",
        lambda p, h: p.gin.numel() <= h.small_input and small_input.fits(p),
        small_input,
    ),
    # Every axis divides, 2^k H and W windows within the tile: outputs repeated in registers.
    Route("expand", lambda p, h: expand.fits(p), expand),
    # Windows that are not powers of two, or overlap boundedly: the generic scatters.
    Route("zeroed_scatter", generic.zeroed_wins, zeroed_scatter),
    Route("fill_scatter", generic.scatters, fill_scatter),
    # Steep upsampling: each element gathers its candidate windows.
    Route("gather", dispatch.always, gather),
)


# What each path name of the proof log means.
PATHS = {
    "small_input": "a small input: the generic lane-per-element kernel",
    "expand": "divisible windows: each output repeated over its window in registers",
    "zeroed_scatter": "atomic-free scatter into a zeroed gradient",
    "fill_scatter": "atomic-free fill-and-scatter",
    "gather": "steep upsampling: each element gathers its candidate windows",
    "empty": "an empty tensor: no launch",
    "generic:float64": "float64: the generic op (MUSA has no fp64)",
    "generic:grid_limits": "past the grid limits: the generic op",
}


def in_charge(on_musa: bool) -> bool:
    """Whether this implementation answers for a tensor (`on_musa`: whether it lies on a
    MUSA device): on MUSA, or with the mthreads vendor forced (else the generic op runs,
    silently). Plans read the device once: `tensor.device` costs about 0.4 µs a call, a tenth
    of a tiny gradient's kernel."""
    return on_musa or runtime.vendor() == "mthreads"


_PLANS = PlanCache()


def adaptive_max_pool3d_backward(
    grad_output: torch.Tensor, input: torch.Tensor, indices: torch.Tensor
) -> torch.Tensor:
    """Gradient of adaptive_max_pool3d with respect to its input (Moore Threads kernels)."""
    try:
        key: tuple[object, ...] | None = backward_signature(grad_output, input, indices)
    except AttributeError:  # not tensors: the checks below say so
        key = None
    entry = _PLANS.get(key)
    if entry is None:
        check_backward(grad_output, input, indices)
        entry = (*_plan(grad_output, input, indices), input.device.type == "musa")
        _PLANS.put(key, entry)
    path, plan, on_musa = entry  # the key holds the device
    if not in_charge(on_musa):
        return generic.adaptive_max_pool3d_backward(grad_output, input, indices)
    logger.debug("%s path=%s", PROOF, path)
    if plan is None:
        return generic.adaptive_max_pool3d_backward(grad_output, input, indices)
    return plan(grad_output, indices)


def _plan(
    grad_output: torch.Tensor, input: torch.Tensor, indices: torch.Tensor
) -> tuple[str, generic.BackwardPlan | None]:
    """The path name (of PATHS) and the plan for these tensors; no plan where the generic op
    runs instead."""
    if input.dtype not in SUPPORTED_DTYPES:
        return "generic:float64", None
    taken: list[str] = []

    def choose(p: Backward) -> generic.BackwardLaunch | None:
        chosen = select(p)
        taken.append("generic:grid_limits" if chosen is None else chosen[0].name)
        return None if chosen is None else launch(p, chosen)

    plan = generic.plan_with(grad_output, input, indices, choose)
    return (taken[0] if taken else "empty"), plan


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


def launch(p: Backward, chosen: tuple[Route[Backward], object]) -> generic.BackwardLaunch:
    """The launch of the chosen route and config for problem `p`."""
    route, cfg = chosen
    built: generic.BackwardLaunch = route.kernel.plan(p, cfg, current())
    return built


def launch_for(p: Backward) -> generic.BackwardLaunch | None:
    """This implementation's launch for problem `p`, or None past the grid limits."""
    chosen = select(p)
    return None if chosen is None else launch(p, chosen)
