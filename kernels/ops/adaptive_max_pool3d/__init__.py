"""adaptive_max_pool3d: the generic Triton kernels (values and int64 argmax indices).

Semantics are PyTorch's: the index is the flat offset in the D·H·W volume, the first maximum
wins a tie (smallest offset, PyTorch scans d, h, w in order), and a NaN wins over any number
(the last NaN in scan order, as PyTorch's CPU kernel keeps it). Comparisons run in fp32 (fp64
for fp64 input) or in the input's own type, both exact. One difference: where a window's
maximum is zero and it holds zeros of both signs, the value may carry the other sign than its
first zero's (the reductions do not order -0 and +0; the index is still the first zero's).
Every kernel's loops run over the largest window of each axis, which the host computes, so
they are bounded.

The plan takes the first route of DISPATCH whose condition holds, one kernel module each (the
thresholds are the device's `Heuristics`); a `config` given by the caller names its kernel.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

from kernels import dispatch
from kernels.dispatch import Route
from kernels.heuristics import Heuristics, current
from kernels.launch import Launch, TwoLaunches
from kernels.ops._adaptive import (
    Forward,
    PlanCache,
    allocator,
    as_5d,
    check_input,
    native_key,
    output_size3,
    output_templates,
    signature,
)
from kernels.ops.adaptive_max_pool3d import (
    chunked,
    column_max,
    global_groups,
    global_split,
    lane_window,
    pair_window,
    window_tile,
)

# The plan takes the first route whose condition holds (thresholds: the device's Heuristics).
DISPATCH: tuple[Route[Forward], ...] = (
    # Global pooling of contiguous planes: group maxima, then the winning group read again.
    Route(
        "global_groups",
        lambda p, h: global_groups.fits(p, h.global_groups[1]),
        global_groups,
    ),
    # ... of planes too long for that: each plane split into parts, then a merge.
    Route("global_split", lambda p, h: global_split.fits(p), global_split),
    # Small windows two wide along W: whole input rows loaded, split in registers.
    Route(
        "pair_window",
        lambda p, h: p.elements <= h.lane_window and pair_window.fits(p),
        pair_window,
    ),
    # Small windows of enough (D, H) rows on rows that fit a program: a running max a column.
    Route(
        "column_max",
        lambda p, h: (
            p.elements <= h.small_window
            and p.windows[0] * p.windows[1] >= h.min_column_rows
            and column_max.fits(p)
        ),
        column_max,
    ),
    # Larger small windows tiling W in aligned power-of-two widths: whole windows as vectors.
    Route(
        "window_tile",
        lambda p, h: (
            h.min_tile_window <= p.elements <= h.small_window and window_tile.vectorizes(p)
        ),
        window_tile,
    ),
    # Other small windows: a lane per output walks its window.
    Route("lane_window", lambda p, h: p.elements <= h.lane_window, lane_window),
    # Anything else: windows reduced chunk by chunk.
    Route("chunked", dispatch.always, chunked),
)

ForwardConfig = (
    global_groups.Config
    | global_split.Config
    | pair_window.Config
    | column_max.Config
    | window_tile.Config
    | lane_window.Config
    | chunked.Config
)
ForwardLaunch = Launch | TwoLaunches
_PLANS = PlanCache()


def adaptive_max_pool3d(
    input: torch.Tensor,
    output_size: int | Sequence[int | None],
    *,
    config: ForwardConfig | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Adaptive 3-D max pooling of a 4-D (C,D,H,W) or 5-D (N,C,D,H,W) tensor of any strides.

    Returns (values, int64 indices), both contiguous, shaped like PyTorch's. `config` (for
    tuning and tests) overrides the plan's choice: its type names the kernel, its fields the
    tiles.
    """
    if _PLANS.native and config is None:  # a plan the C++ helper runs whole (kernels.native)
        made = _PLANS.run_native(output_size, input)
        if made is not None:
            return made  # type: ignore[no-any-return]
    sizes: object = None
    try:
        sizes = output_size if isinstance(output_size, int) else tuple(output_size)
        key: tuple[object, ...] | None = (signature(input), sizes, config)
        plan = _PLANS.get(key)
    except (AttributeError, TypeError):  # not a tensor, or odd sizes: the checks say so
        key, plan = None, None
    if plan is None:
        check_input(input)
        native = key is not None and config is None
        plan = plan_forward(input, output_size3(output_size, input), config, native, sizes)
        _PLANS.put(key, plan)
    return plan(input)


def select(
    x: torch.Tensor,
    output_size: tuple[int, int, int],
    config: ForwardConfig | None = None,
    heuristics: Heuristics | None = None,
) -> tuple[Route[Forward], ForwardConfig, Forward]:
    """The route and config the plan takes for the 5-D `x` (no launch is built)."""
    problem = Forward.of(x, output_size)
    route, cfg = dispatch.select(DISPATCH, problem, heuristics or current(), config)
    return route, cfg, problem


def launch_for(
    x: torch.Tensor,
    output_size: tuple[int, int, int],
    config: ForwardConfig | None = None,
    heuristics: Heuristics | None = None,
) -> ForwardLaunch:
    """The launch of the plan for the 5-D `x`: launch(x, out, indices)."""
    h = heuristics or current()
    route, cfg, problem = select(x, output_size, config, h)
    launch: ForwardLaunch = route.kernel.plan(problem, cfg, h)
    return launch


def plan_forward(
    input: torch.Tensor,
    output_size: tuple[int, int, int],
    config: ForwardConfig | None,
    native: bool = False,
    sizes: object = None,
) -> Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]:
    """A launcher for inputs like this one: plan(input) -> (values, indices). With `native`,
    once its first call has found the lean launch, calls like this one (the same `sizes`, as
    the caller gave them) run whole in the C++ helper where it serves the device."""
    shape = (*input.shape[:-3], *output_size)
    new_out = allocator(shape, input.dtype, input.device)
    new_indices = allocator(shape, torch.int64, input.device)

    def new() -> tuple[torch.Tensor, torch.Tensor]:
        return new_out(), new_indices()

    if any(size == 0 for size in shape):
        return lambda x: new()
    launch = launch_for(as_5d(input), output_size, config)
    unbatched = input.dim() == 4
    key = native_key(sizes, input) if native else None
    first = key is not None

    def run(input: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        nonlocal first
        out, indices = new_out(), new_indices()
        launch(input[None] if unbatched else input, out, indices)
        if first:  # the first call compiled the kernel and found its lean launch, if any
            first = False
            templates = output_templates(shape, (input.dtype, torch.int64), input.device)
            _PLANS.put_native(key, launch, templates, passes=(0,))
        return out, indices

    run.launch = launch  # type: ignore[attr-defined]  # for tests and probes: its path
    return run
