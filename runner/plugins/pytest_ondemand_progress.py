"""A pytest plugin the runner adds to a job's accuracy step (`-p pytest_ondemand_progress`, from
a copy in the job's directory; named so that no plugin on PyPI shadows it): it appends the
run's progress to `$TEST_PROGRESS_FILE` as JSON lines, `{"total": n}` once the tests are
collected, then `{"done": k, "failed": f, "id": "..."}` per finished test (`id` only for a
failure), so the runner can show "12/411 tests, 1 failed" while the step runs. Under
pytest-xdist only the controller writes (it sees every report). It imports only pytest and
the standard library; the runner reads the file as hostile."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

_ID_CHARS = 300


class _Progress:
    def __init__(self, path: str) -> None:
        self.path = path
        self.done = 0
        self.failed = 0

    def write(self, record: dict[str, Any]) -> None:
        try:
            with open(self.path, "a", encoding="utf-8") as handle:
                handle.write(json.dumps(record) + "\n")
        except OSError:
            pass  # progress is a courtesy; the tests' verdict does not depend on it

    def report(self, report: Any) -> None:
        # A test is done after its call phase, or after a setup that failed or skipped it.
        failed = report.failed
        if report.when == "call" or (report.when == "setup" and not report.passed):
            self.done += 1
        elif not (report.when == "teardown" and failed):
            return
        record: dict[str, Any] = {"done": self.done, "failed": self.failed}
        if failed:
            self.failed += 1
            record["failed"] = self.failed
            record["id"] = str(report.nodeid)[:_ID_CHARS]
        self.write(record)


_progress: _Progress | None = None


def pytest_configure(config: Any) -> None:
    global _progress
    path = os.environ.get("TEST_PROGRESS_FILE")
    if path and not hasattr(config, "workerinput"):  # an xdist worker: the controller writes
        _progress = _Progress(path)


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: Any) -> None:
    if _progress is not None:
        _progress.write({"total": len(session.items)})


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: Any, ids: list[str]) -> None:
    # The controller collects nothing itself: each worker tells it what it collected.
    if _progress is not None:
        _progress.write({"total": len(ids)})


def pytest_runtest_logreport(report: Any) -> None:
    if _progress is not None:
        _progress.report(report)
