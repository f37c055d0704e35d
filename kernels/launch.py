"""A kernel launch with everything but the tensors fixed at planning time.

Triton's `kernel[grid](...)` binds and specializes every argument on every call, which on a
30-argument kernel costs more host time than a small kernel takes on the GPU. A plan knows
its scalars, constants and grid once, so after the first launch (which compiles or loads
the kernel) it launches the compiled kernel directly, in one of two ways:

- *lean* (CUDA, a Triton whose launcher is the generic C `launch` fed by a Python wrapper):
  the C function called with everything but the stream and the tensors bound once, and the
  tensors passed as device addresses, which spares the wrapper's per-call work and the
  driver's pointer query per tensor, and the runner's launch metadata and empty hook chains
  (Triton 3.5 and later pass and call them on every launch). Taken only where the wrapper
  would add nothing: no scratch buffers, no sanitizer, no tensor descriptors, no launch
  hooks installed.
- *runner*: the compiled kernel's own launcher (`compiled[grid]`) with the arguments in
  signature order.

Both rely on the plan's key to hold everything Triton specializes on: shapes, strides and
dtypes fix the scalars, and the tensors' 16-byte alignment the pointers' specialization
(`kernels.ops._adaptive.signature`). Under the Triton interpreter, or where a direct call is
refused, every call goes through `kernel[grid]` as before.
"""

from __future__ import annotations

import copy
import types
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import torch

from kernels import runtime


class Launch:
    """`launch(*tensors)` runs `kernel[grid](*tensors, *scalars, **constants)`."""

    def __init__(
        self, kernel: Any, grid: tuple[int, ...], scalars: Sequence[Any], constants: dict[str, Any]
    ) -> None:
        self.kernel = kernel
        self.grid = grid
        self.scalars = tuple(scalars)
        self.constants = constants
        self._direct: Callable[..., Any] | None = None
        self._tail: tuple[Any, ...] = ()
        self._refused = runtime.interpreted
        self.path = "jit"  # how calls launch now: jit, runner or lean

    def __call__(self, *tensors: Any) -> None:
        if self._direct is not None:
            try:
                self._direct(*tensors)
                return
            except TypeError:  # this Triton's launcher takes other arguments: stop trying
                self._direct, self._refused, self.path = None, True, "jit"
        compiled = self.kernel[self.grid](*tensors, *self.scalars, **self.constants)
        if not self._refused:
            self._refused = True  # one attempt: a direct launcher or nothing
            self._prepare_direct(compiled, tensors)

    def _prepare_direct(self, compiled: Any, tensors: tuple[Any, ...]) -> None:
        """The compiled kernel's launcher and the non-tensor arguments in signature order."""
        names = list(getattr(self.kernel, "arg_names", ()))
        positional = len(tensors) + len(self.scalars)
        rest = names[positional:]
        if not names or any(name not in self.constants for name in rest):
            return
        getitem = getattr(compiled, "__getitem__", None)
        if getitem is None:
            return
        self._tail = (*self.scalars, *(self.constants[name] for name in rest))
        grid = (*self.grid, 1, 1)[:3]  # its launcher wants all three sides
        runner = getitem(grid)
        tail = self._tail
        lean = _lean_launcher(compiled, grid, runner, (*tensors, *tail), len(tensors))
        if lean is not None:
            self._direct, self.path = lean, "lean"
        else:
            self._direct, self.path = lambda *tensors: runner(*tensors, *tail), "runner"


class TwoLaunches:
    """`launch(x, out, indices)` as two launches through scratch buffers: `parts(x,
    *scratch)` writes them, `merge([x,] *scratch, out, indices)` reads them (and the input
    again where `merge_reads_input`). `scratch` holds one allocator a buffer, fixed at
    planning time, so a call allocates as cheaply as a plan's outputs."""

    def __init__(
        self,
        parts: Launch,
        merge: Launch,
        scratch: Sequence[Callable[[], torch.Tensor]],
        merge_reads_input: bool = False,
    ) -> None:
        self.parts, self.merge, self.kernel = parts, merge, parts.kernel
        self.scratch, self.merge_reads_input = tuple(scratch), merge_reads_input

    def __call__(self, x: torch.Tensor, out: torch.Tensor, indices: torch.Tensor) -> None:
        buffers = [new() for new in self.scratch]
        self.parts(x, *buffers)
        if self.merge_reads_input:
            self.merge(x, *buffers, out, indices)
        else:
            self.merge(*buffers, out, indices)

    @property
    def path(self) -> str:
        """How the kernels launch now (`Launch.path`)."""
        return self.parts.path


def _hooked(hook: Any) -> bool:
    """Whether a launch hook knob would do anything: a function (Triton up to 3.4), or a
    chain holding any (later Tritons' `HookChain`, there even when empty)."""
    if hook is None:
        return False
    calls = getattr(hook, "calls", None)
    return bool(calls) if isinstance(calls, list) else True


def _same(passed: Any, args: tuple[Any, ...]) -> bool:
    """Whether `passed` is a tuple of exactly the objects of `args`."""
    return (
        isinstance(passed, tuple)
        and len(passed) == len(args)
        and all(a is b for a, b in zip(passed, args, strict=True))
    )


# A stream handle no device has: what the recording call passes, to find where the stream goes.
_MARK_STREAM = 0x7E57_5EED_0001


def _lean_wrapper(compiled: Any) -> Any:
    """The compiled kernel's `CudaLauncher` where its C function can be called directly (see
    the module's docstring), else None."""
    try:
        from triton import knobs
        from triton.backends.nvidia.driver import CudaLauncher
    except ImportError:
        return None
    wrapper = getattr(compiled, "run", None)
    hooks = knobs.runtime
    if (
        runtime.device != "cuda"
        or not hasattr(torch._C, "_cuda_getCurrentRawStream")
        or not hasattr(torch._C, "_cuda_getDevice")
        or type(wrapper) is not CudaLauncher
        or not callable(getattr(wrapper, "launch", None))
        or isinstance(wrapper.launch, types.FunctionType | types.MethodType)  # a Python layer
        or getattr(wrapper, "global_scratch_size", 0) != 0
        or getattr(wrapper, "profile_scratch_size", 0) != 0
        or getattr(wrapper, "gsan_enabled", False)
        or _hooked(hooks.launch_enter_hook)
        or _hooked(hooks.launch_exit_hook)
    ):
        return None
    return wrapper


def _recorded_call(
    wrapper: Any, compiled: Any, grid: tuple[int, ...], args: tuple[Any, ...]
) -> tuple[tuple[Any, ...], tuple[Any, ...], bool] | None:
    """(head, middle, spread): what the wrapper passes its C function before the stream, and
    between the stream and `args`, and whether it spreads `args` (Triton 3.6) or passes them
    as one tuple (3.9). Recorded on a copy of the wrapper whose C function only records; None
    where the wrapper passes anything else of its own (a sanitizer's arguments, say)."""
    calls: list[tuple[Any, ...]] = []
    recorder = copy.copy(wrapper)
    recorder.launch = lambda *call: calls.append(call)
    fixed = (compiled.function, compiled.packed_metadata, None, None, None)
    try:
        type(wrapper).__call__(recorder, *grid, _MARK_STREAM, *fixed, *args)
    except Exception:  # a wrapper that does more than pass on: not lean
        return None
    call = calls[0] if len(calls) == 1 else ()
    n = len(args)
    if call and _same(call[-1], args):
        prefix, spread = call[:-1], False
    elif len(call) > n and _same(call[-n:], args):
        prefix, spread = call[:-n], True
    else:
        return None
    marks = [i for i, v in enumerate(prefix) if type(v) is int and v == _MARK_STREAM]
    if len(marks) != 1:
        return None
    return prefix[: marks[0]], prefix[marks[0] + 1 :], spread


def _lean_launcher(
    compiled: Any,
    grid: tuple[int, ...],
    runner: Callable[..., Any],
    args: tuple[Any, ...],
    n_tensors: int,
) -> Callable[..., Any] | None:
    """`go(*tensors)` calling Triton's C launch function directly with the tensors (as their
    addresses) and the rest of `args`, or None where this Triton, device or kernel needs its
    Python wrapper. `args` are a call's arguments in signature order, its `n_tensors` tensors
    first. A call falls back to `runner` where the current CUDA device is not the one the
    kernel was loaded on, or where launch hooks (a profiler's) have been installed since."""
    wrapper = _lean_wrapper(compiled)
    recorded = None if wrapper is None else _recorded_call(wrapper, compiled, grid, args)
    if recorded is None:
        return None
    from triton import knobs

    head, middle, spread = recorded
    launch, hooks, tail = wrapper.launch, knobs.runtime, args[n_tensors:]
    enter, leave = hooks.launch_enter_hook, hooks.launch_exit_hook
    enter_calls, leave_calls = getattr(enter, "calls", ()), getattr(leave, "calls", ())
    raw_stream, current = torch._C._cuda_getCurrentRawStream, torch._C._cuda_getDevice
    device = current()

    def go(*tensors: Any) -> None:
        if (
            current() != device
            or hooks.launch_enter_hook is not enter
            or hooks.launch_exit_hook is not leave
            or enter_calls
            or leave_calls
        ):
            runner(*tensors, *tail)  # another device, or a hook (a profiler's) installed since
            return
        ptrs = [t.data_ptr() for t in tensors]
        if spread:
            launch(*head, raw_stream(device), *middle, *ptrs, *tail)
        else:
            launch(*head, raw_stream(device), *middle, (*ptrs, *tail))

    go.parts = LeanParts(  # type: ignore[attr-defined]
        launch,
        head,
        middle,
        tail,
        spread,
        device,
        current,
        raw_stream,
        hooks,
        enter,
        leave,
        enter_calls,
        leave_calls,
        n_tensors,
    )
    return go


class LeanParts(NamedTuple):
    """What a lean launch binds once: Triton's C function, what it is passed before the
    stream (`head`), between the stream and the tensors (`middle`), after them (`tail`), and
    whether the tensors and tail are spread; then what each call checks: the device the
    kernel was loaded on, how to read the current one and its stream, and the launch hooks
    (with their chains' lists) as they were; last, how many tensors a call passes. All but
    the last, in this order, are the C++ helper's state after its templates and passes."""

    launch: Callable[..., Any]
    head: tuple[Any, ...]
    middle: tuple[Any, ...]
    tail: tuple[Any, ...]
    spread: bool
    device: int
    current_device: Callable[[], int]
    raw_stream: Callable[[int], int]
    hooks: Any
    enter: Any
    leave: Any
    enter_calls: Any
    leave_calls: Any
    n_tensors: int


def native_state(
    launch: Launch, templates: Sequence[torch.Tensor], passes: Sequence[int]
) -> tuple[Any, ...] | None:
    """The state `kernels.native`'s `call` launches a registered call with: new outputs like
    `templates`, then this launch run on the given tensors at `passes` and the outputs, as the
    lean path would run it. None where the launch has no lean path yet (before its first
    call, or never) or takes other tensors."""
    parts = getattr(launch._direct, "parts", None)
    if not isinstance(parts, LeanParts) or parts.n_tensors != len(passes) + len(templates):
        return None
    if not (isinstance(parts.enter_calls, list) and isinstance(parts.leave_calls, list)):
        return None  # Tritons whose hooks are plain functions: the Python path checks them
    return (tuple(templates), tuple(passes), *parts[:-1])
