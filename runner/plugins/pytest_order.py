"""A pytest plugin the runner adds to an accuracy step when a trusted build of the repository
recorded how long each test took (`-p pytest_order`, `$TEST_DURATIONS_FILE`): it orders the
tests longest first, alternating with the shortest (longest, shortest, second longest, ...).

Under pytest-xdist with `--maxschedchunk 1` each worker starts with two consecutive tests and
then takes one at a time, so the slow tests start at once on different workers instead of
queueing behind each other at the end (a step takes as long as its busiest worker). In one
process (no xdist: a warm job, runner/environment/parallel.py) order changes no step's time,
so pytest's own order stays, each module's tests together (its module-scoped fixtures set up
once). Order changes no verdict; unknown tests count as instant. It imports only pytest and
the standard library."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

_LIMIT = 16 * 1024 * 1024


def _key(nodeid: str) -> str:
    """The test's JUnit name, `classname.name`, as the durations file has it."""
    try:
        from _pytest.junitxml import mangle_test_address
    except ImportError:
        return nodeid
    return ".".join(mangle_test_address(nodeid))


def _durations() -> dict[str, float]:
    path = os.environ.get("TEST_DURATIONS_FILE")
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.loads(handle.read(_LIMIT))
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, int | float)}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    if not hasattr(config, "workerinput"):  # not an xdist worker: one process, or the controller
        return
    durations = _durations()
    if not durations or len(items) < 3:
        return
    ranked = sorted(items, key=lambda item: -durations.get(_key(item.nodeid), 0.0))
    order: list[Any] = []
    low, high = 0, len(ranked) - 1
    while low <= high:
        order.append(ranked[low])
        low += 1
        if low <= high:
            order.append(ranked[high])
            high -= 1
    items[:] = order
