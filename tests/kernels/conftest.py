"""Fixtures of the kernel accuracy suite: the device under test, and the report properties."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kernels import registry, runtime


@pytest.fixture(scope="session", autouse=True)
def _record_implementations(record_testsuite_property: Callable[[str, object], None]) -> None:
    """Record which implementation of each operator ran, for the runner's JUnit report."""
    record_testsuite_property("kernels.vendor", runtime.vendor())
    record_testsuite_property("kernels.device", runtime.device)
    for op in registry.OPERATORS:
        record_testsuite_property(f"implementation.{op.name}", runtime.implementation(op.name))
