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
