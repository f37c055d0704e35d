"""The C++ helper's functions (`kernels.native`): `key` and `call`.

`call(states, extra, *tensors)` launches with whatever launch function the call's state
names; here that is a Python function that records its arguments (no GPU launcher exists on
this machine), so the tests check the outputs, the argument order, the checks that send a
call back to the Python path, and that no reference leaks. On a CUDA machine the last two
tests check that real forward and backward calls run whole in it. Building it:
test_native_build.py.
"""

from __future__ import annotations

import sys
import weakref
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest
import torch

from kernels import native
from kernels.launch import Launch, LeanParts, native_state
from kernels.ops import adaptive_max_pool3d as forward_module
from kernels.ops import adaptive_max_pool3d_backward as backward_module
from tests.kernels.support import DEVICE, assert_close, assert_forward_matches, randn, seeded

pytestmark = [pytest.mark.adaptive_max_pool3d, pytest.mark.adaptive_max_pool3d_backward]

needs_compiler = pytest.mark.skipif(
    native.compile_command(Path("a.cpp"), Path("a.so"), "c++20") is None,
    reason="no C++ compiler, Python headers or torch headers here",
)


@pytest.fixture(scope="module")
def built() -> Path:
    """The helper as the kernels build it: in the compile cache, where a runner's job finds
    the trusted build's copy instead of compiling it again."""
    return native.build(native.cache_root())


@pytest.fixture(scope="module")
def host(built: Path) -> ModuleType:
    return native._load(built)


def run(host: ModuleType, state: tuple[Any, ...], *tensors: Any) -> Any:
    """What `call` does for a call whose plan registered `state`."""
    return host.call({host.key(None, *tensors): state}, None, *tensors)


@needs_compiler
def test_outputs_are_new_contiguous_tensors_like_each_template(host: ModuleType) -> None:
    templates = (
        torch.empty((1, 1, 1, 1, 1), dtype=torch.float16).expand(2, 3, 4, 5, 6),
        torch.empty((4, 5), dtype=torch.int64).t(),  # strided: made contiguous
        torch.empty((0, 3), dtype=torch.bfloat16),
    )
    state = state_for(lambda *a: None, True, Hooks(), templates)
    x = torch.randn(2)
    made = run(host, state, x)
    assert [(t.shape, t.dtype, t.device) for t in made] == [
        (t.shape, t.dtype, t.device) for t in templates
    ]
    assert all(t.is_contiguous() for t in made)
    made[0].fill_(1.0)
    again = run(host, state, x)
    assert again[0].data_ptr() != made[0].data_ptr()  # new storage each call
    gone = [weakref.ref(t) for t in made]
    del made
    assert all(ref() is None for ref in gone)  # held only by the tuple returned
    assert run(host, state_for(lambda *a: None, True, Hooks(), ()), x) == ()
    odd = state_for(lambda *a: None, True, Hooks(), (templates[0], 3))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="template 1 is not a tensor"):
        run(host, odd, x)


class Subclass(torch.Tensor):
    """A tensor subclass: its own __torch_function__ may change what an op does."""


class Hooks:
    """Triton's runtime knobs as the state reads them: the two launch hooks."""

    def __init__(self) -> None:
        self.launch_enter_hook: Any = SimpleNamespace(calls=[])
        self.launch_exit_hook: Any = SimpleNamespace(calls=[])


def state_for(
    launch: Any, spread: bool, hooks: Hooks, templates: tuple[torch.Tensor, ...], device: int = 0
) -> tuple[Any, ...]:
    """A state as `kernels.launch.native_state` builds it, around a recording launch."""
    return (
        templates,
        (0,),  # the kernel takes the first tensor given, then the outputs
        launch,
        ("gx", "gy", "gz"),
        ("function", "metadata"),
        (7, "CONST"),
        spread,
        device,
        lambda: 0,  # the current device
        lambda device: 1000 + device,  # its stream
        hooks,
        hooks.launch_enter_hook,
        hooks.launch_exit_hook,
        hooks.launch_enter_hook.calls,
        hooks.launch_exit_hook.calls,
    )


@needs_compiler
@pytest.mark.parametrize("spread", [True, False], ids=["spread", "packed"])
def test_launch_passes_what_the_lean_path_passes(host: ModuleType, spread: bool) -> None:
    calls: list[tuple[Any, ...]] = []
    hooks = Hooks()
    templates = (
        torch.empty((1, 1), dtype=torch.float32).expand(3, 4),
        torch.empty((1, 1), dtype=torch.int64).expand(3, 4),
    )
    state = state_for(lambda *a: calls.append(a), spread, hooks, templates)
    x = torch.randn(5, 6)
    out, indices = run(host, state, x)
    assert (out.shape, out.dtype, indices.dtype) == ((3, 4), torch.float32, torch.int64)
    pointers = (x.data_ptr(), out.data_ptr(), indices.data_ptr())
    head = ("gx", "gy", "gz", 1000, "function", "metadata")
    tail = (*pointers, 7, "CONST")
    assert calls == [(*head, *tail) if spread else (*head, tail)]
    gone = [weakref.ref(out), weakref.ref(indices)]
    del out, indices
    assert all(ref() is None for ref in gone)


@needs_compiler
def test_launch_passes_the_chosen_tensors_and_one_output_alone(host: ModuleType) -> None:
    """A backward's state: of (grad, input, indices) the kernel takes grad and indices, then
    its one output, which comes back as the tensor itself."""
    calls: list[tuple[Any, ...]] = []
    template = (torch.empty((1, 1), dtype=torch.float64).expand(4, 5),)
    state = list(state_for(lambda *a: calls.append(a), True, Hooks(), template))
    state[1] = (0, 2)
    grad, input, indices = torch.randn(2), torch.randn(4, 5), torch.zeros(2, dtype=torch.int64)
    made = run(host, tuple(state), grad, input, indices)
    assert isinstance(made, torch.Tensor) and made.shape == (4, 5) and made.dtype == torch.float64
    pointers = (grad.data_ptr(), indices.data_ptr(), made.data_ptr())
    assert calls == [("gx", "gy", "gz", 1000, "function", "metadata", *pointers, 7, "CONST")]
    state[1] = (0, 3)
    with pytest.raises(TypeError, match="not given"):
        run(host, tuple(state), grad, input, indices)


@needs_compiler
def test_a_lean_launch_gives_the_state_launch_takes(host: ModuleType) -> None:
    """kernels.launch.native_state puts a lean launch's parts where host.cpp reads them."""
    calls: list[tuple[Any, ...]] = []
    hooks = Hooks()
    enter, leave = hooks.launch_enter_hook, hooks.launch_exit_hook
    lean = Launch(kernel=None, grid=(1,), scalars=(), constants={})
    go = SimpleNamespace(
        parts=LeanParts(
            lambda *a: calls.append(a), ("g",), ("m",), (5,), True, 0, lambda: 0,
            lambda device: 9, hooks, enter, leave, enter.calls, leave.calls, 3,
        )
    )  # fmt: skip
    lean._direct = go  # type: ignore[assignment]
    templates = (torch.empty(1).expand(2), torch.empty(1, dtype=torch.int64).expand(2))
    assert native_state(lean, templates[:1], (0,)) is None  # the launch takes three tensors
    assert native_state(lean, templates, (0, 1)) is None
    state = native_state(lean, templates, (0,))
    assert state is not None
    x = torch.randn(3)
    out, indices = run(host, state, x)
    assert calls == [("g", 9, "m", x.data_ptr(), out.data_ptr(), indices.data_ptr(), 5)]
    unlaunched = Launch(kernel=None, grid=(1,), scalars=(), constants={})
    assert native_state(unlaunched, templates, (0,)) is None


@needs_compiler
def test_launch_defers_to_the_python_path_where_its_checks_fail(host: ModuleType) -> None:
    calls: list[tuple[Any, ...]] = []
    templates = (torch.empty(1).expand(2), torch.empty(1, dtype=torch.int64).expand(2))
    x = torch.randn(4)

    def record(*args: Any) -> None:
        calls.append(args)

    hooks = Hooks()
    assert run(host, state_for(record, True, hooks, templates, device=1), x) is None
    hooks.launch_enter_hook.calls.append(print)  # a profiler's hook added to the chain
    assert run(host, state_for(record, True, hooks, templates), x) is None
    hooks = Hooks()
    state = state_for(record, True, hooks, templates)
    hooks.launch_exit_hook = SimpleNamespace(calls=[])  # the chain itself replaced
    assert run(host, state, x) is None
    assert calls == []
    with pytest.raises(TypeError, match="native state"):
        run(host, state[:-1], x)


@needs_compiler
@pytest.mark.parametrize("spread", [True, False], ids=["spread", "packed"])
def test_launch_keeps_every_reference_count(host: ModuleType, spread: bool) -> None:
    """Nothing the state holds gains or loses a reference over many calls, failing or not."""
    sentinel = object()
    hooks = Hooks()
    templates = (torch.empty(1).expand(8), torch.empty(1, dtype=torch.int64).expand(8))
    state = list(state_for(lambda *a: sentinel, spread, hooks, templates))
    state[5] = (sentinel, 3)  # the tail
    ok = tuple(state)

    def refuse(*args: Any) -> None:
        raise TypeError("takes other arguments")

    state[2] = refuse  # the launch function
    failing = tuple(state)
    x = torch.randn(8)
    before = (sys.getrefcount(sentinel), sys.getrefcount(x), sys.getrefcount(templates[0]))
    for _ in range(200):
        run(host, ok, x)
        with pytest.raises(TypeError, match="other arguments"):
            run(host, failing, x)
    after = (sys.getrefcount(sentinel), sys.getrefcount(x), sys.getrefcount(templates[0]))
    assert after == before


@needs_compiler
def test_key_holds_what_a_plan_depends_on(host: ModuleType) -> None:
    x = torch.randn(2, 3, 4, dtype=torch.float16)
    same = torch.randn(2, 3, 4, dtype=torch.float16)
    assert host.key((1, 2), x) == host.key((1, 2), same) == host.key([1, 2], same)
    others = [
        host.key((1, 3), x),
        host.key((1, 2), x.float()),
        host.key((1, 2), x.transpose(0, 1)),
        host.key((1, 2), torch.randn(2, 3, 5, dtype=torch.float16)),
        host.key((1, 2), torch.randn(13, dtype=torch.float16)[1:].view(2, 3, 2)),  # unaligned
        host.key((1, 2), x[None]),
        host.key((1, 2), x, x),
        host.key((1, 2), x.reshape(24), x.reshape(24)),  # where one tensor ends matters
        host.key((1, 2), x.reshape(4, 6), x.reshape(4, 6)),
    ]
    assert host.key((1, 2), x) not in others
    assert len(set(others)) == len(others)
    with pytest.raises(TypeError, match="tensors"):
        host.key((1, 2), [1])
    with pytest.raises(TypeError):  # no storage to key by
        host.key((1, 2), torch.zeros(2, 2).to_sparse())


@needs_compiler
def test_call_launches_only_a_registered_plan(host: ModuleType) -> None:
    calls: list[tuple[Any, ...]] = []
    templates = (torch.empty(1).expand(3), torch.empty(1, dtype=torch.int64).expand(3))
    state = state_for(lambda *a: calls.append(a), True, Hooks(), templates)
    x = torch.randn(6)
    states = {host.key((3,), x): state}
    assert host.call(states, (3,), torch.randn(7)) is None  # another shape: not registered
    assert host.call(states, {"unhashable": 1}, x) is None
    assert host.call(states, (3,), "not a tensor") is None
    assert host.call(states, (3,), x.as_subclass(Subclass)) is None  # Python honours its hooks
    assert host.call(states, (3,), torch.zeros(6).to_sparse()) is None  # no storage
    assert calls == []
    out, indices = host.call(states, [3], torch.randn(6))
    assert out.shape == indices.shape == (3,) and len(calls) == 1
    with pytest.raises(TypeError, match="a dict"):
        host.call([], (3,), x)


@pytest.mark.skipif(DEVICE != "cuda", reason="the C++ path serves CUDA devices")
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
def test_forward_calls_run_whole_in_it_on_cuda(dtype: torch.dtype) -> None:
    """After a plan's first call, calls like it (4-D or 5-D, sizes as a tuple or a list) take
    the C++ path and match PyTorch; a call it does not know still takes the Python path."""
    helper = native.host()
    assert helper is not None, native.status()
    gen = seeded("native forward", dtype)
    for x in (randn((2, 3, 9, 10, 11), dtype, gen), randn((3, 9, 10, 11), dtype, gen)):
        before = len(forward_module._PLANS.native)
        for size in ((4, 5, 6), (4, 5, 6), [4, 5, 6], (4, 5, 6)):
            assert_forward_matches(forward_module.adaptive_max_pool3d(x, size), x, (4, 5, 6))
        assert len(forward_module._PLANS.native) == before + 1
        got = helper.call(forward_module._PLANS.native, (4, 5, 6), x)
        assert got is not None
        assert_forward_matches(got, x, (4, 5, 6))
    odd = randn((2, 3, 9, 10, 12), dtype, gen)[:, :, :, :, 1:]  # unaligned, strided
    assert_forward_matches(forward_module.adaptive_max_pool3d(odd, (4, 5, 6)), odd, (4, 5, 6))


@pytest.mark.skipif(DEVICE != "cuda", reason="the C++ path serves CUDA devices")
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=str)
def test_backward_calls_run_whole_in_it_on_cuda(dtype: torch.dtype) -> None:
    helper = native.host()
    assert helper is not None, native.status()
    gen = seeded("native backward", dtype)
    for shape in ((2, 3, 8, 8, 8), (3, 8, 8, 8)):  # small_input's plain launch, 5-D and 4-D
        x = randn(shape, dtype, gen)
        _, indices = torch.ops.aten.adaptive_max_pool3d.default(x, [4, 4, 4])
        grad = randn(tuple(indices.shape), dtype, gen)
        want = torch.ops.aten.adaptive_max_pool3d_backward.default(grad, x, indices)
        before = len(backward_module._PLANS.native)
        for _ in range(3):
            got = backward_module.adaptive_max_pool3d_backward(grad, x, indices)
            assert_close(got, want, rtol=0, atol=0)
        assert len(backward_module._PLANS.native) == before + 1
        again = helper.call(backward_module._PLANS.native, None, grad, x, indices)
        assert isinstance(again, torch.Tensor)
        assert_close(again, want, rtol=0, atol=0)
