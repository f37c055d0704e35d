"""adaptive_max_pool3d_backward: the generic Triton kernels, deterministic, no atomics.

Each input element receives the sum of the gradients of the output windows that contain it
and chose it. Per axis the outputs covering input p are floor(p·O/I) ≤ o < ceil((p+1)·O/I),
at most `max_window(O, I)` of them, so every candidate loop is bounded at compile time. No
atomics and no second pass over the gradient: fp32 accumulation (fp64 for fp64), a fixed
order of additions, the input's dtype stored.

The plan takes the first route of DISPATCH whose condition holds, one kernel module each (the
thresholds are the device's `Heuristics`); a `config` given by the caller names its kernel.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from kernels import dispatch
from kernels.dispatch import Route
from kernels.heuristics import Heuristics, current
from kernels.launch import Launch
from kernels.ops._adaptive import (
    Backward,
    PlanCache,
    allocator,
    as_5d,
    backward_signature,
    check_backward,
    native_key,
    output_templates,
)
from kernels.ops.adaptive_max_pool3d_backward import (
    disjoint,
    fill_scatter,
    rows,
    small_input,
    zeroed_scatter,
)


def scatters(p: Backward, h: Heuristics) -> bool:
    """Overlaps leave each element at most `h.max_candidates` candidate outputs."""
    return p.candidate_outputs <= h.max_candidates


def zeroed_wins(p: Backward, h: Heuristics) -> bool:
    """Windows overlap on two axes or more, and there are too few planes for a program each:
    fill_scatter's tiles would share most of their outputs with their neighbours."""
    return scatters(p, h) and p.candidate_outputs > 2 and p.planes < h.many_planes


# The plan takes the first route whose condition holds (thresholds: the device's Heuristics).
DISPATCH: tuple[Route[Backward], ...] = (
    # Small inputs whose axes all divide: a lane per element, launch latency only.
    Route(
        "small_input",
        lambda p, h: p.gin.numel() <= h.small_input and small_input.fits(p),
        small_input,
    ),
    # Every axis divides, 2^k H and W windows: outputs read once, repeated in registers.
    Route("disjoint", lambda p, h: disjoint.fits(p), disjoint),
    # Overlaps on several axes, few planes: zero fill, then a lane per output.
    Route("zeroed_scatter", zeroed_wins, zeroed_scatter),
    # Bounded overlaps: zeros, then each gradient stored at its argmax, in one launch.
    Route("fill_scatter", scatters, fill_scatter),
    # Steep upsampling (many candidates an element): rows gathering their candidates.
    Route("rows", dispatch.always, rows),
)

BackwardConfig = (
    small_input.Config | disjoint.Config | zeroed_scatter.Config | fill_scatter.Config | rows.Config
)
BackwardLaunch = Launch | zeroed_scatter.ZeroedLaunch
BackwardPlan = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
_PLANS = PlanCache()


def adaptive_max_pool3d_backward(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    indices: torch.Tensor,
    *,
    config: BackwardConfig | None = None,
) -> torch.Tensor:
    """Gradient of adaptive_max_pool3d with respect to its input, deterministic.

    `indices` are the forward's flat D·H·W offsets; any strides of `grad_output` and `indices`
    work. `config` (for tuning and tests) overrides the plan's choice: its type names the
    kernel, its fields the tiles.
    """
    if _PLANS.native and config is None:  # a plan the C++ helper runs whole (kernels.native)
        made = _PLANS.run_native(None, grad_output, input, indices)
        if made is not None:
            return made  # type: ignore[no-any-return]
    try:
        key: tuple[object, ...] | None = (backward_signature(grad_output, input, indices), config)
    except AttributeError:  # not tensors: the checks below say so
        key = None
    plan = _PLANS.get(key)
    if plan is None:
        check_backward(grad_output, input, indices)
        native = _PLANS if key is not None and config is None else None
        plan = plan_with(grad_output, input, indices, lambda p: launch_for(p, config), native)
        assert plan is not None  # the last route takes any shape
        _PLANS.put(key, plan)
    return plan(grad_output, indices)


def problem(grad_output: torch.Tensor, input: torch.Tensor, indices: torch.Tensor) -> Backward:
    """The 5-D problem of these tensors (4-D ones gain a batch of 1); its `gin` is a new,
    uninitialized gradient laid out as PyTorch's own: contiguous, whatever the input's memory
    format (ATen's meta function allocates it so, channels_last_3d included)."""
    gin = torch.empty(input.shape, dtype=input.dtype, device=input.device)
    return Backward(as_5d(grad_output), as_5d(indices), as_5d(gin))


def select(
    p: Backward, config: BackwardConfig | None = None, heuristics: Heuristics | None = None
) -> tuple[Route[Backward], BackwardConfig]:
    """The route and config the plan takes for problem `p` (no launch is built)."""
    return dispatch.select(DISPATCH, p, heuristics or current(), config)


def launch_for(
    p: Backward, config: BackwardConfig | None = None, heuristics: Heuristics | None = None
) -> BackwardLaunch:
    """The launch of the plan for problem `p`: launch(grad, indices, grad_input), 5-D."""
    h = heuristics or current()
    route, cfg = select(p, config, h)
    launch: BackwardLaunch = route.kernel.plan(p, cfg, h)
    return launch


def plan_with(
    grad_output: torch.Tensor,
    input: torch.Tensor,
    indices: torch.Tensor,
    choose: Callable[[Backward], BackwardLaunch | None],
    native: PlanCache | None = None,
) -> BackwardPlan | None:
    """plan(grad_output, indices) -> grad_input around the launch `choose` picks for the
    problem of these tensors; None where it picks none. Empty tensors need no launch. With
    `native`, once its first call has found the lean launch, calls like this one run whole in
    the C++ helper where it serves the device (`native.run_native(None, grad_output, input,
    indices)`). Shared with the vendor implementations."""
    new = allocator(input.shape, input.dtype, input.device)

    if input.numel() == 0:
        return lambda grad, idx: new()
    if grad_output.numel() == 0:  # no window at all (an output size of 0): nothing flows back
        return lambda grad, idx: new().zero_()

    unbatched = input.dim() == 4
    launch = choose(problem(grad_output, input, indices))
    if launch is None:
        return None

    key = native_key(None, grad_output, input, indices) if native is not None else None
    first = key is not None

    def run(grad: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
        nonlocal first
        grad_input = new()
        if unbatched:
            launch(grad[None], idx[None], grad_input[None])
        else:
            launch(grad, idx, grad_input)
        if first and native is not None:  # the first call compiled the kernel: lean or not
            first = False
            template = output_templates(grad_input.shape, (grad_input.dtype,), grad_input.device)
            native.put_native(key, launch, template, passes=(0, 2))  # grad, indices
        return grad_input

    run.launch = launch  # type: ignore[attr-defined]  # for tests and probes: its path
    return run
