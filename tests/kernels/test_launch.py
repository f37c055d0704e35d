"""The direct launch path of `kernels.launch.Launch`, and that every real plan can take it.

A GPU launcher cannot exist here, so the compiled kernel is a stand-in that records its
arguments; the plans are the real ones, whose argument order the direct path depends on.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest
import torch

from kernels import launch as launch_module
from kernels.launch import Launch
from kernels.ops.adaptive_max_pool3d_backward import BackwardConfig
from tests.kernels.support import randn, reference_forward, seeded

pytestmark = [pytest.mark.adaptive_max_pool3d, pytest.mark.adaptive_max_pool3d_backward]

# kernels.ops exports the operators under their modules' names: import the modules by path.
forward_module = importlib.import_module("kernels.ops.adaptive_max_pool3d")
forward_tiles_module = importlib.import_module("kernels.ops._forward_tiles")
forward_global_module = importlib.import_module("kernels.ops._forward_global")
forward_columns_module = importlib.import_module("kernels.ops._forward_columns")
backward_module = importlib.import_module("kernels.ops.adaptive_max_pool3d_backward")


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


NOT_SMALL = BackwardConfig(4, 8, 1, small=False)  # as on inputs past the small-input kernel's
BACKWARD_CASES = [
    ((1, 2, 4, 6, 8), (2, 3, 4), None),  # small input: a lane per element
    ((1, 2, 4, 6, 8), (2, 3, 4), NOT_SMALL),  # disjoint
    ((1, 2, 5, 12, 24), (1, 1, 1), NOT_SMALL),  # fill-and-scatter
    ((1, 2, 9, 13, 28), (5, 9, 11), None),  # zeroed scatter
    ((1, 1, 3, 2, 5), (7, 5, 9), None),  # rows
    ((1, 1, 5, 9, 13), (3, 5, 6), BackwardConfig(4, 8, 1, scatter=False)),  # rows, overlaps
]


@pytest.mark.parametrize(("shape", "output_size", "config"), BACKWARD_CASES, ids=str)
def test_every_backward_plan_can_launch_directly(
    shape: tuple[int, ...], output_size: tuple[int, int, int], config: BackwardConfig | None
) -> None:
    x = randn(shape, torch.float32, seeded(shape, "launch"))
    _, idx = reference_forward(x, output_size)
    grad = torch.ones(idx.shape, dtype=x.dtype)
    plan = backward_module._plan_launch(grad, idx, torch.empty_like(x), config)
    launch = getattr(plan, "launch", plan)  # the zeroed scatter wraps its Launch
    assert_direct(launch, n_tensors=3)


FORWARD_CASES = [
    ((1, 2, 4, 6, 8), (2, 3, 4), False),  # pair windows
    ((1, 2, 5, 7, 9), (2, 3, 4), False),  # column maxima
    ((1, 2, 4, 8, 16), (2, 4, 4), False),  # column maxima, aligned W windows
    ((1, 1, 4, 34, 16), (1, 2, 4), False),  # window tiles (H windows of 17 rows)
    ((1, 1, 1, 34, 2), (1, 2, 2), False),  # lane per window (H windows of 17 rows)
    ((1, 2, 8, 9, 9), (1, 1, 1), False),  # global pooling: parts, then the merge
    ((1, 2, 8, 9, 9), (1, 1, 1), True),  # chunked (planes not contiguous)
]
# Tensors a kernel takes before its scalars, where not three.
TENSORS = {"_global_merge_kernel": 4}


@pytest.mark.parametrize(("shape", "output_size", "strided"), FORWARD_CASES, ids=str)
def test_every_forward_plan_can_launch_directly(
    shape: tuple[int, ...],
    output_size: tuple[int, int, int],
    strided: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[Launch] = []

    class Spy(Launch):
        def __init__(self, *args: Any) -> None:
            super().__init__(*args)
            seen.append(self)

    for module in (
        forward_module,
        forward_tiles_module,
        forward_global_module,
        forward_columns_module,
    ):
        monkeypatch.setattr(module, "Launch", Spy)
    x = randn(shape, torch.float32, seeded(shape))
    if strided:
        x = x.transpose(1, -1).contiguous().transpose(1, -1)
    forward_module.plan_forward(x, output_size, None)
    assert len(seen) == (2 if output_size == (1, 1, 1) and not strided else 1)
    for launch in seen:
        assert_direct(launch, n_tensors=TENSORS.get(launch.kernel.fn.__name__, 3))


def assert_direct(launch: Launch, n_tensors: int) -> None:
    """The plan's scalars and constants cover its kernel's signature exactly."""
    compiled = Compiled()
    launch._prepare_direct(compiled, n_tensors)
    assert launch._direct is not None, f"{launch.kernel.fn.__name__}: no direct path"
    names = launch.kernel.arg_names
    assert n_tensors + len(launch._tail) == len(names)
    constexprs = names[n_tensors + len(launch.scalars) :]
    assert set(constexprs) == set(launch.constants) - {"num_warps", "num_stages"}
