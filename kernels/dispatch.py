"""Dispatch tables: an operator's kernels in the order its plan tries them.

Each operator's public module holds a `DISPATCH` tuple of `Route`s: the kernel's one name,
when the default plan takes it (a condition on the problem and the device's heuristics), and
the kernel's module. A kernel module gives `NAME`, a frozen `Config` dataclass (its tiles,
with `kernel = NAME`), `default(problem, heuristics) -> Config` and
`plan(problem, config, heuristics)`, which builds the launch. The plan takes the first route
whose condition holds; a config given by the caller (tests, tuning) names its kernel instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Generic, TypeVar

from kernels.heuristics import Heuristics

P = TypeVar("P")  # the problem a plan is made for (`kernels.ops._adaptive.Forward`, ...)


@dataclass(frozen=True)
class Route(Generic[P]):
    """One row of a dispatch table."""

    name: str  # the kernel's name: its module's NAME
    when: Callable[[P, Heuristics], bool]  # the default plan takes it when this holds
    kernel: ModuleType  # the kernel's module: NAME, Config, default, plan

    def __post_init__(self) -> None:
        if self.name != self.kernel.NAME:
            raise ValueError(f"route {self.name!r} names kernel {self.kernel.NAME!r}")


def first(table: Sequence[Route[P]], problem: P, heuristics: Heuristics) -> Route[P]:
    """The first route whose condition holds (a table ends with one that always does)."""
    for route in table:
        if route.when(problem, heuristics):
            return route
    raise LookupError(f"no route of {[r.name for r in table]} takes {problem}")


def named(table: Sequence[Route[P]], name: str) -> Route[P]:
    """The route of kernel `name`; ValueError naming the table's kernels otherwise."""
    for route in table:
        if route.name == name:
            return route
    raise ValueError(f"no kernel {name!r} here; known: {', '.join(r.name for r in table)}")


def select(
    table: Sequence[Route[P]], problem: P, heuristics: Heuristics, config: Any = None
) -> tuple[Route[P], Any]:
    """The route and config a plan takes: `config`'s kernel when given, else the first route
    whose condition holds, with that kernel's default config."""
    if config is not None:
        return named(table, config.kernel), config
    route = first(table, problem, heuristics)
    return route, route.kernel.default(problem, heuristics)


def always(problem: Any, heuristics: Heuristics) -> bool:
    """The last route's condition."""
    return True
