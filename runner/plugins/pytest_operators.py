"""A pytest plugin the runner adds to a job's accuracy step (`-p pytest_operators`, from a copy
in the job's directory): it writes the operators the checkout's tests know, every marker
registered or used on a collected test, to `$TEST_OPERATORS_FILE` before `-m` deselects any,
so the service can answer a misspelt operator at once next time. It imports only pytest."""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest

_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,63}$")
_LIMIT = 5000


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    path = os.environ.get("TEST_OPERATORS_FILE")
    if not path:
        return
    names = {line.split(":", 1)[0].split("(", 1)[0].strip() for line in config.getini("markers")}
    for item in items:
        names.update(mark.name for mark in item.iter_markers())
    known = sorted(n for n in names if _NAME.match(n))[:_LIMIT]
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(known, handle)


# Under pytest-xdist the JUnit report is the controller's, and a worker's
# `record_testsuite_property` records nothing: the suite properties the runner reads
# (`implementation.<op>`) would be lost. A worker keeps them and sends them with its output;
# the controller adds each once to its report.
_PROPERTIES = "testsuite_properties"


class _WorkerProperties:
    def __init__(self) -> None:
        self.properties: list[tuple[str, str]] = []

    def add_global_property(self, name: str, value: object) -> None:
        self.properties.append((name, str(value)))


def _xml_key() -> Any:
    try:
        from _pytest.junitxml import xml_key
    except ImportError:  # another pytest: properties under xdist are then lost, as before
        return None
    return xml_key


def pytest_configure(config: Any) -> None:
    key = _xml_key()
    if key is not None and hasattr(config, "workerinput") and key not in config.stash:
        config.stash[key] = _WorkerProperties()


def pytest_sessionfinish(session: Any) -> None:
    key = _xml_key()
    config = session.config
    store = config.stash.get(key, None) if key is not None else None
    if isinstance(store, _WorkerProperties) and hasattr(config, "workeroutput"):
        config.workeroutput[_PROPERTIES] = json.dumps(store.properties[:_LIMIT])


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    key = _xml_key()
    xml = node.config.stash.get(key, None) if key is not None else None
    if xml is None or isinstance(xml, _WorkerProperties):
        return
    try:
        properties = json.loads(getattr(node, "workeroutput", {}).get(_PROPERTIES, "[]"))
    except ValueError:
        return
    have = set(getattr(xml, "global_properties", []))
    for name, value in properties:
        if (name, value) not in have:
            xml.add_global_property(name, value)
            have.add((name, value))
