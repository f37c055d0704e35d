"""Failing tests told apart by their re-runs: pure functions over typed data.

After a failing accuracy step the runner re-runs each failing test by node id a few times on
the head and once on the merge base (`runner/job/kinds/accuracy/reruns.py`), then `classify` says
what each failure is: *flaky* (a re-run on the head passed), *already failing* (the head's
re-runs and the merge base fail it), *new* (the head's re-runs fail it, the merge base passes
it), *infrastructure* (its re-runs gave no verdict: not collected, the process crashed), or
*unclassified* (not re-run within the budget, or nothing to compare with). The node ids come
from the pull request's JUnit report: `rerunnable` says which may be handed to pytest.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from workflows.models import ClassifiedFailure, FailureClass

MAX_NODE_ID = 1000
_NODE_PATH = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-/]*\.py$")
CRASHED = re.compile(r"\bworker '?gw\d+'? crashed\b", re.IGNORECASE)  # pytest-xdist's words


class Outcome(StrEnum):
    """One re-run of one test: passed, failed (a failure or an error), or no verdict (not
    collected, skipped, or its process ended without reporting it)."""

    passed = "passed"
    failed = "failed"
    none = "none"


@dataclass(frozen=True)
class Evidence:
    """What was learnt of one failing test: its first failure's message, each re-run on the
    head that ran (in order), and the merge base's re-run (None: not run there)."""

    test_id: str
    head: tuple[Outcome, ...] = ()
    base: Outcome | None = None
    message: str = ""
    no_verdict: str = ""  # why a re-run gave no verdict, where one did not


def rerunnable(test_id: str, root: Path | None = None) -> bool:
    """Whether `test_id` is a node id to hand pytest (after `--`): `path/to/test_x.py::name…`
    with a relative path of plain characters and no `..`, no control characters, and where
    `root` is given, a regular file in it reached without a symbolic link."""
    if not test_id or len(test_id) > MAX_NODE_ID:
        return False
    if any(ord(c) < 32 or ord(c) == 127 for c in test_id):
        return False
    path, sep, rest = test_id.partition("::")
    if not sep or not rest or not _NODE_PATH.match(path):
        return False
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return False
    if root is None:
        return True
    here = root
    for part in parts:
        here = here / part
        if here.is_symlink():
            return False
    return here.is_file()


def classify(
    evidence: Evidence, merge_base: str | None, unrun: str = "not re-run"
) -> ClassifiedFailure:
    """The class of one failing test and why, in the report's words. `unrun` says why a test
    with no re-run on the head was not re-run (the budget, the cap); `merge_base` is the
    commit the base side ran (None: there was none to compare with)."""
    head = evidence.head
    passes = sum(o is Outcome.passed for o in head)
    fails = sum(o is Outcome.failed for o in head)
    ran = passes + fails

    def made(cls: FailureClass, why: str) -> ClassifiedFailure:
        return ClassifiedFailure(
            test_id=evidence.test_id[:MAX_NODE_ID],
            failure_class=cls,
            why=why[:500],
            reruns=ran,
            rerun_failures=fails,
        )

    if passes:
        return made(FailureClass.flaky, f"passed {passes} of {_runs(ran)}")
    if not head:
        return made(FailureClass.unclassified, unrun)
    if not fails:  # every re-run ended without a verdict on it
        why = f"{_runs(len(head))} gave no verdict"
        if evidence.no_verdict:
            why += f" ({evidence.no_verdict})"
        if CRASHED.search(evidence.message):
            why = f"its worker crashed; {why}"
        return made(FailureClass.infrastructure, why)
    failed = f"failed {fails} of {_runs(ran)}"
    short = (merge_base or "")[:7]
    if evidence.base is Outcome.failed:
        return made(FailureClass.already_failing, f"fails on the merge base {short} too ({failed})")
    if evidence.base is Outcome.passed:
        return made(FailureClass.new, f"{failed}; passes on the merge base {short}")
    if merge_base is None:
        return made(FailureClass.unclassified, f"{failed}; no merge base to compare with")
    if evidence.base is Outcome.none:
        return made(
            FailureClass.unclassified, f"{failed}; gave no verdict on the merge base {short}"
        )
    return made(FailureClass.unclassified, f"{failed}; not re-run on the merge base ({unrun})")


def _runs(n: int) -> str:
    return f"{n} re-run" if n == 1 else f"{n} re-runs"


def counts(tests: Sequence[ClassifiedFailure]) -> dict[FailureClass, int]:
    """How many failures of each class, in the classes' order, zero counts left out."""
    found = {cls: sum(t.failure_class is cls for t in tests) for cls in FailureClass}
    return {cls: n for cls, n in found.items() if n}
