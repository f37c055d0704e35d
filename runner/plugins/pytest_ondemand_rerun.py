"""A pytest plugin the runner adds when it re-runs a failing accuracy step's failures
(`-p pytest_ondemand_rerun`, from a copy in the job's directory): it keeps only the tests whose
node ids are listed in `$TEST_RERUN_IDS` (a JSON list the runner wrote) and deselects the
rest of the files it is given, so a node id the checkout no longer has is simply not run
(no verdict on it) instead of ending the whole re-run with a usage error. It imports only
pytest and the standard library."""

from __future__ import annotations

import json
import os
from typing import Any

_MAX_IDS = 10_000


def _wanted() -> set[str] | None:
    path = os.environ.get("TEST_RERUN_IDS")
    if not path:
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            ids = json.load(handle)
    except (OSError, ValueError):
        return set()
    if not isinstance(ids, list):
        return set()
    return {i for i in ids[:_MAX_IDS] if isinstance(i, str)}


def pytest_collection_modifyitems(session: Any, config: Any, items: list[Any]) -> None:
    wanted = _wanted()
    if wanted is None:
        return
    keep = [item for item in items if item.nodeid in wanted]
    dropped = [item for item in items if item.nodeid not in wanted]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
