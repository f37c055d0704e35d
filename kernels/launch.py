"""A kernel launch with everything but the tensors fixed at planning time.

Triton's `kernel[grid](...)` binds and specializes every argument on every call, which on a
30-argument kernel costs more host time than a small kernel takes on the GPU. A plan knows
its scalars, constants and grid once, so after the first launch (which compiles or loads
the kernel) it calls the compiled kernel's launcher directly with the same arguments in
signature order. Under the Triton interpreter, or if the direct call is refused, every call
goes through `kernel[grid]` as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

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

    def __call__(self, *tensors: Any) -> None:
        if self._direct is not None:
            try:
                self._direct(*tensors, *self._tail)
                return
            except TypeError:  # this Triton's launcher takes other arguments: stop trying
                self._direct, self._refused = None, True
        compiled = self.kernel[self.grid](*tensors, *self.scalars, **self.constants)
        if not self._refused:
            self._refused = True  # one attempt: the launcher or nothing
            self._prepare_direct(compiled, len(tensors))

    def _prepare_direct(self, compiled: Any, n_tensors: int) -> None:
        """The compiled kernel's launcher and the non-tensor arguments in signature order."""
        names = list(getattr(self.kernel, "arg_names", ()))
        positional = n_tensors + len(self.scalars)
        rest = names[positional:]
        if not names or any(name not in self.constants for name in rest):
            return
        getitem = getattr(compiled, "__getitem__", None)
        if getitem is None:
            return
        self._tail = (*self.scalars, *(self.constants[name] for name in rest))
        self._direct = getitem((*self.grid, 1, 1)[:3])  # its launcher wants all three sides
