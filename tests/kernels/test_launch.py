"""The direct launch path of `kernels.launch.Launch`, and that every real plan can take it.

A GPU launcher cannot exist here, so the compiled kernel is a stand-in that records its
arguments; the plans are the real ones, whose argument order the direct path depends on.
"""

from __future__ import annotations

import importlib
import itertools
import math
from typing import Any

import pytest
import torch

from kernels import launch as launch_module
from kernels.heuristics import Heuristics
from kernels.launch import Launch
from kernels.ops import adaptive_max_pool3d as forward_module
from kernels.ops import adaptive_max_pool3d_backward as backward_module
from kernels.ops._adaptive import Forward, allocator, backward_signature, signature
from tests.kernels.support import (
    DEVICE,
    HALF_DTYPES,
    HEURISTICS,
    ON_GPU,
    assert_backward_matches,
    assert_forward_matches,
    meta,
    randn,
    seeded,
)

pytestmark = [pytest.mark.adaptive_max_pool3d, pytest.mark.adaptive_max_pool3d_backward]

MTHREADS = importlib.import_module("kernels.backends._mthreads.ops.adaptive_max_pool3d_backward")


class Compiled:
    """Stands in for a compiled kernel: `compiled[grid](*args)` records or refuses."""

    def __init__(self, refuse: bool = False) -> None:
        self.calls: list[tuple[tuple[int, ...], tuple[Any, ...]]] = []
        self.refuse = refuse

    def __getitem__(self, grid: tuple[int, ...]) -> Any:
        def run(*args: Any) -> None:
            if self.refuse:
                raise TypeError("takes other arguments")
            self.calls.append((grid, args))

        return run


class Jitted:
    """Stands in for a JITFunction: `kernel[grid](*args, **constants)` returns `compiled`."""

    def __init__(self, compiled: Compiled) -> None:
        self.arg_names = ["x", "y", "n", "m", "BLOCK", "WIDE"]
        self.compiled = compiled
        self.calls: list[tuple[tuple[int, ...], tuple[Any, ...], dict[str, Any]]] = []

    def __getitem__(self, grid: tuple[int, ...]) -> Any:
        def run(*args: Any, **kwargs: Any) -> Compiled:
            self.calls.append((grid, args, kwargs))
            return self.compiled

        return run


def on_device(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch_module.runtime, "interpreted", False)


def test_direct_path_after_the_first_call(monkeypatch: pytest.MonkeyPatch) -> None:
    on_device(monkeypatch)
    compiled = Compiled()
    kernel = Jitted(compiled)
    launch = Launch(kernel, (7,), (3, 4), {"WIDE": False, "BLOCK": 64, "num_warps": 4})
    launch("a", "b")
    launch("c", "d")
    assert kernel.calls == [((7,), ("a", "b", 3, 4), {"WIDE": False, "BLOCK": 64, "num_warps": 4})]
    # Signature order, constexprs included, all three grid sides.
    assert compiled.calls == [((7, 1, 1), ("c", "d", 3, 4, 64, False))]


def test_a_refused_direct_call_falls_back_for_good(monkeypatch: pytest.MonkeyPatch) -> None:
    on_device(monkeypatch)
    kernel = Jitted(Compiled(refuse=True))
    launch = Launch(kernel, (2, 3), (3, 4), {"BLOCK": 64, "WIDE": True})
    for tensors in (("a", "b"), ("c", "d"), ("e", "f")):
        launch(*tensors)
    # The first call, the refused second one relaunched the usual way, and the third.
    assert [call[1][:2] for call in kernel.calls] == [("a", "b"), ("c", "d"), ("e", "f")]


def test_no_direct_path_without_every_constant(monkeypatch: pytest.MonkeyPatch) -> None:
    on_device(monkeypatch)
    compiled = Compiled()
    kernel = Jitted(compiled)
    launch = Launch(kernel, (1,), (3, 4), {"BLOCK": 64})  # WIDE left to a default
    launch("a", "b")
    launch("c", "d")
    assert len(kernel.calls) == 2 and compiled.calls == []


def test_under_the_interpreter_every_call_binds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(launch_module.runtime, "interpreted", True)  # on a GPU runner too
    kernel = Jitted(Compiled())
    launch = Launch(kernel, (1,), (3, 4), {"BLOCK": 64, "WIDE": False})
    launch("a", "b")
    launch("c", "d")
    assert len(kernel.calls) == 2


# A shape each kernel takes, for every kernel of every dispatch table.
FORWARD_CASES = {
    "global_groups": ((1, 2, 8, 9, 9), (1, 1, 1)),
    "global_split": ((1, 2, 8, 9, 9), (1, 1, 1)),
    "pair_window": ((1, 2, 4, 6, 8), (2, 3, 4)),
    "column_max": ((1, 2, 5, 7, 9), (2, 3, 4)),
    "window_tile": ((1, 1, 4, 34, 16), (1, 2, 4)),
    "lane_window": ((1, 1, 1, 34, 2), (1, 2, 2)),
    "chunked": ((1, 2, 8, 9, 9), (1, 1, 2)),
}
BACKWARD_CASES = {
    "small_input": ((1, 2, 4, 6, 8), (2, 3, 4)),
    "disjoint": ((1, 2, 4, 6, 8), (2, 3, 4)),
    "fill_scatter": ((1, 2, 5, 12, 24), (1, 1, 1)),
    "zeroed_scatter": ((1, 2, 9, 13, 28), (5, 9, 11)),
    "rows": ((1, 1, 3, 2, 5), (7, 5, 9)),
    "expand": ((1, 2, 4, 6, 8), (2, 3, 4)),
    "gather": ((1, 1, 3, 2, 5), (7, 5, 9)),
}
# Tensors a kernel takes before its scalars, where not three.
TENSORS = {
    "global_split_merge_kernel": 4,
    "global_groups_kernel": 2,
    "global_groups_pick_kernel": 4,
}


def test_every_kernel_is_covered() -> None:
    assert [r.name for r in forward_module.DISPATCH] == list(FORWARD_CASES)
    tables = (*backward_module.DISPATCH, *MTHREADS.DISPATCH)
    assert {r.name for r in tables} == set(BACKWARD_CASES)


@pytest.mark.parametrize("heuristics", ["h200", "interpreter"])
@pytest.mark.parametrize("kernel", list(FORWARD_CASES))
def test_every_forward_plan_can_launch_directly(kernel: str, heuristics: str) -> None:
    """Each kernel's default plan, as a device or the interpreter makes it: its scalars and
    constants cover the kernel's signature exactly (nothing is launched)."""
    h: Heuristics = HEURISTICS[heuristics]
    shape, output_size = FORWARD_CASES[kernel]
    route = next(r for r in forward_module.DISPATCH if r.name == kernel)
    p = Forward.of(meta(shape), output_size)
    launch = route.kernel.plan(p, route.kernel.default(p, h), h)
    for part in (launch.parts, launch.merge) if kernel.startswith("global") else (launch,):
        assert_direct(part, n_tensors=TENSORS.get(part.kernel.fn.__name__, 3))


@pytest.mark.parametrize("heuristics", ["h200", "interpreter"])
@pytest.mark.parametrize("kernel", list(BACKWARD_CASES))
def test_every_backward_plan_can_launch_directly(kernel: str, heuristics: str) -> None:
    h: Heuristics = HEURISTICS[heuristics]
    shape, output_size = BACKWARD_CASES[kernel]
    out = (*shape[:2], *output_size)
    p = backward_module.problem(meta(out), torch.empty(shape), meta(out, torch.int64))
    route = next(r for r in (*backward_module.DISPATCH, *MTHREADS.DISPATCH) if r.name == kernel)
    launch = route.kernel.plan(p, route.kernel.default(p, h), h)
    assert_direct(getattr(launch, "launch", launch), n_tensors=3)  # zeroed: a wrapped Launch


def assert_direct(launch: Launch, n_tensors: int) -> None:
    """The plan's scalars and constants cover its kernel's signature exactly."""
    compiled = Compiled()
    launch._prepare_direct(compiled, ("tensor",) * n_tensors)
    assert launch._direct is not None, f"{launch.kernel.fn.__name__}: no direct path"
    names = launch.kernel.arg_names
    assert n_tensors + len(launch._tail) == len(names)
    constexprs = names[n_tensors + len(launch.scalars) :]
    assert set(constexprs) == set(launch.constants) - {"num_warps", "num_stages"}


def test_the_plan_key_tells_misaligned_data_apart() -> None:
    """A compiled kernel assumes its first call's pointer alignment: a view of the same shape
    and strides starting off 16 bytes must not reuse an aligned view's plan."""
    base = torch.zeros(4 * 64 + 1, dtype=torch.float16, device=DEVICE)
    aligned_view = base[:128].view(2, 64)
    shifted_view = base[1:129].view(2, 64)
    assert signature(aligned_view) != signature(shifted_view)
    assert signature(aligned_view) == signature(base[64:192].view(2, 64))  # 128 bytes in


@pytest.mark.parametrize("dtype", HALF_DTYPES, ids=str)
@pytest.mark.parametrize(
    ("shape", "output_size"),
    [((2, 3, 8, 8, 9), (4, 4, 3)), ((1, 2, 7, 9, 10), (3, 4, 4)), ((3, 6, 6, 6), (2, 3, 3))],
    ids=str,
)
def test_repeated_calls_stay_right_on_any_path(
    shape: tuple[int, ...], output_size: tuple[int, int, int], dtype: torch.dtype
) -> None:
    """The second and later calls of a plan take the direct path (the lean one on CUDA);
    each must match PyTorch, misaligned views after aligned ones included."""
    gen = seeded("repeat", shape, dtype)
    numel = math.prod(shape)
    for call in range(4):
        offset = call % 2  # aligned, then one element in: off 16 bytes
        flat = randn((numel + 1,), dtype, gen)
        x = flat[offset : offset + numel].view(shape)
        got = forward_module.adaptive_max_pool3d(x, output_size)
        assert_forward_matches(got, x, output_size)
        indices = got[1]  # PyTorch's, as asserted
        gflat = randn((indices.numel() + 1,), dtype, gen)
        grad = gflat[offset : offset + indices.numel()].view(indices.shape)
        got_grad = backward_module.adaptive_max_pool3d_backward(grad, x, indices)
        assert_backward_matches(got_grad, grad, x, indices)
    key = (backward_signature(grad, x, indices), None)
    plan = backward_module._PLANS.get(key)
    assert plan is not None
    if DEVICE == "cuda" and lean_launcher_here():
        assert plan.launch.path == "lean"
    elif ON_GPU:
        assert plan.launch.path in ("lean", "runner")


def lean_launcher_here() -> bool:
    """Whether this Triton launches CUDA kernels through a Python wrapper of a C function."""
    try:
        from triton.backends.nvidia.driver import CudaLauncher
    except ImportError:
        return False
    return "launch" in CudaLauncher.__init__.__code__.co_names


@pytest.mark.parametrize("ndim", [4, 5])
def test_allocations_are_laid_out_as_torch_empty(ndim: int) -> None:
    """The plans' allocator gives what `torch.empty` would: shape, strides and dtype, for every
    mix of empty, one-long and longer axes."""
    for shape in itertools.product([0, 1, 2, 3], repeat=ndim):
        for dtype in (torch.float16, torch.int64):
            got = allocator(shape, dtype, torch.device(DEVICE))()
            want = torch.empty(shape, dtype=dtype, device=DEVICE)
            assert (got.shape, got.stride(), got.dtype) == (want.shape, want.stride(), want.dtype)
            assert got.device == want.device


class ChainStandIn:
    """Triton 3.5+'s launch hook knob: a chain of hooks, there even when empty."""

    def __init__(self) -> None:
        self.calls: list[Any] = []


class LauncherStandIn:
    """Stands in for Triton's `CudaLauncher`: its `__call__` passes everything on to the C
    `launch` as Triton 3.6 does (arguments spread at the end) or 3.9 (one tuple, last)."""

    spread = True

    def __init__(self) -> None:
        self.launch_cooperative_grid, self.launch_pdl = False, False
        self.global_scratch_size = self.profile_scratch_size = 0
        self.launch: Any = None

    def __call__(self, gx: int, gy: int, gz: int, stream: int, function: int, *args: Any) -> None:
        fixed = (gx, gy, gz, stream, function, self.launch_cooperative_grid, self.launch_pdl)
        if self.spread:
            self.launch(*fixed, None, None, *args)
        else:
            self.launch(*fixed, None, None, "annotations", args[4:])


class CompiledStandIn:
    def __init__(self, wrapper: LauncherStandIn) -> None:
        self.run, self.function, self.packed_metadata = wrapper, 99, ("meta",)


@pytest.mark.parametrize("spread", [True, False], ids=["triton-3.6", "triton-3.9"])
def test_the_lean_launch_passes_what_the_wrapper_would(
    spread: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After recording the wrapper's call once, the lean path calls the C function with the
    current stream and the tensors as addresses, everything else as the wrapper passed it; a
    hook installed later, or another current device, sends calls back to the runner."""
    import triton.backends.nvidia.driver as nvidia_driver
    from triton import knobs

    monkeypatch.setattr(nvidia_driver, "CudaLauncher", LauncherStandIn)
    monkeypatch.setattr(launch_module.runtime, "device", "cuda")
    devices, streams = [0], {0: 7001}
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: devices[0], raising=False)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", streams.get, raising=False)
    enter, leave = ChainStandIn(), ChainStandIn()
    monkeypatch.setattr(knobs.runtime, "launch_enter_hook", enter)
    monkeypatch.setattr(knobs.runtime, "launch_exit_hook", leave)
    wrapper = LauncherStandIn()
    wrapper.spread = spread
    launched: list[tuple[Any, ...]] = []
    wrapper.launch = type("C", (), {"__call__": lambda self, *a: launched.append(a)})()
    runner_calls: list[tuple[Any, ...]] = []
    x, y = torch.zeros(4), torch.ones(8)
    go = launch_module._lean_launcher(
        CompiledStandIn(wrapper), (3, 1, 1), lambda *a: runner_calls.append(a), (x, y, 5, 64), 2
    )
    assert go is not None and launched == []  # recording launches nothing
    go(y, x)
    head = (3, 1, 1, 7001, 99, False, False, None, None)
    rest = (("meta",), None, None, None, y.data_ptr(), x.data_ptr(), 5, 64)
    assert launched == [(*head, *rest) if spread else (*head, "annotations", rest[4:])]
    enter.calls.append(print)  # a profiler's hook: Triton's runner must call it
    go(x, y)
    enter.calls.clear()
    devices[0] = 1
    go(x, y)
    assert len(launched) == 1 and runner_calls == [(x, y, 5, 64)] * 2


def test_no_lean_launch_where_the_wrapper_adds_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    """A wrapper that passes more than our arguments (a sanitizer's) keeps its own path."""
    import triton.backends.nvidia.driver as nvidia_driver

    monkeypatch.setattr(nvidia_driver, "CudaLauncher", LauncherStandIn)
    monkeypatch.setattr(launch_module.runtime, "device", "cuda")
    monkeypatch.setattr(torch._C, "_cuda_getDevice", lambda: 0, raising=False)
    monkeypatch.setattr(torch._C, "_cuda_getCurrentRawStream", lambda d: 1, raising=False)
    wrapper = LauncherStandIn()
    wrapper.launch = type("C", (), {"__call__": lambda self, *a: None})()
    original = LauncherStandIn.__call__
    monkeypatch.setattr(LauncherStandIn, "__call__", lambda self, *a: original(self, *a, "extra"))
    x = torch.zeros(4)
    assert (
        launch_module._lean_launcher(CompiledStandIn(wrapper), (1, 1, 1), print, (x, 3), 1) is None
    )
