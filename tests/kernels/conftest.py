"""Fixtures of the kernel accuracy suite: the device under test, the report properties, and the
`plumbing` marker.

A test marked `plumbing` checks the runtime or the test plumbing (a fresh process reading
`KERNELS_VENDOR`, say), not an operator's kernels, although its module carries the operator's
marker. An operator's job (`pytest tests/kernels -m <op>`, on the job's device) leaves it out:
it would pay seconds for a check no kernel change can fail. `make test` and any selection
that names no operator run it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from kernels import registry, runtime

PLUMBING = "plumbing"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{PLUMBING}: checks the runtime or test plumbing; no operator's job runs it"
    )


def names_an_operator(markexpr: str) -> bool:
    """Whether a `-m` expression names an operator of the registry."""
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", markexpr))
    return any(op.name in words for op in registry.OPERATORS)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Deselect the plumbing tests from a selection that names an operator."""
    if not names_an_operator(config.getoption("markexpr", "") or ""):
        return
    plumbing = [item for item in items if item.get_closest_marker(PLUMBING) is not None]
    if plumbing:
        config.hook.pytest_deselected(items=plumbing)
        items[:] = [item for item in items if item.get_closest_marker(PLUMBING) is None]


@pytest.fixture(scope="session", autouse=True)
def _record_implementations(record_testsuite_property: Callable[[str, object], None]) -> None:
    """Record which implementation of each operator ran, for the runner's JUnit report."""
    record_testsuite_property("kernels.vendor", runtime.vendor())
    record_testsuite_property("kernels.device", runtime.device)
    for op in registry.OPERATORS:
        record_testsuite_property(f"implementation.{op.name}", runtime.implementation(op.name))
