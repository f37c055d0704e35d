"""The job user's way to the runner's Python, for the tests that run steps as that user.

The interpreter may live where only root can pass (here, under /root): such a test lets
others pass through the directories on the way, and puts their modes back after. Tests run
in parallel (pytest-xdist), so the change is counted across processes under a lock: the
first test in opens the way, the last one out puts the modes back; one test's teardown
never closes the way under another's running job.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import stat
import sys
from collections.abc import Iterator
from pathlib import Path

STATE = Path("/tmp/ondemand-tests-reachable-python.json")
LOCK = Path("/tmp/ondemand-tests-reachable-python.lock")


@contextlib.contextmanager
def _locked() -> Iterator[None]:
    with open(LOCK, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _read() -> dict:
    try:
        return json.loads(STATE.read_text())
    except (OSError, ValueError):
        return {"users": 0, "changed": []}


@contextlib.contextmanager
def reachable_python() -> Iterator[None]:
    with _locked():
        state = _read()
        if state["users"] == 0:
            state["changed"] = []
            for start in (Path(sys.executable).resolve(), Path(sys.prefix).resolve()):
                for directory in start.parents:
                    mode = directory.stat().st_mode
                    if not mode & stat.S_IXOTH:
                        state["changed"].append([str(directory), stat.S_IMODE(mode)])
                        directory.chmod(stat.S_IMODE(mode) | stat.S_IXOTH)
        state["users"] += 1
        STATE.write_text(json.dumps(state))
    try:
        yield
    finally:
        with _locked():
            state = _read()
            state["users"] = max(0, state["users"] - 1)
            if state["users"] == 0:
                for directory, mode in reversed(state["changed"]):
                    Path(directory).chmod(mode)
                state["changed"] = []
            STATE.write_text(json.dumps(state))
