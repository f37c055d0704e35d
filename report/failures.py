"""A failing job's failures as the report tells them apart: the classes its runner found by
re-running each failing test (`JobResult.failures`), in the report's order and words, and what
the dashboard knows of them as flaky. Whether they fail the job's gate is `report.gate`'s
`failures_fail_gate`. Pure: plain functions over the view.
"""

from __future__ import annotations

from collections.abc import Sequence

from report.markdown import plural
from report.views import JobView, KnownFlaky
from workflows.models import (
    ClassifiedFailure,
    FailureClass,
    FailureClasses,
)

# The order the report lists failures in: what fails a pull request first.
CLASS_ORDER = (
    FailureClass.new,
    FailureClass.unclassified,
    FailureClass.infrastructure,
    FailureClass.flaky,
    FailureClass.already_failing,
)
LABEL = {
    FailureClass.new: "new",
    FailureClass.unclassified: "not classified",
    FailureClass.infrastructure: "infrastructure",
    FailureClass.already_failing: "already failing",
    FailureClass.flaky: "flaky",
}


def classes(view: JobView) -> FailureClasses | None:
    """The job's classified failures, where its runner classified them (None: an older
    runner, or a job whose accuracy step did not fail)."""
    return view.result.failures if view.result is not None else None


def class_words(view: JobView) -> str | None:
    """`1 new failure · 2 flaky · 3 already failing on main`, in the report's order; None
    where the failures were not classified."""
    found = classes(view)
    if found is None or not found.tests:
        return None
    base = view.base_ref or "the merge base"
    words = {
        FailureClass.new: lambda n: plural(n, "new failure"),
        FailureClass.unclassified: lambda n: f"{plural(n, 'failure')} not classified",
        FailureClass.infrastructure: lambda n: plural(n, "infrastructure failure"),
        FailureClass.already_failing: lambda n: f"{n} already failing on {base}",
        FailureClass.flaky: lambda n: f"{n} flaky",
    }
    parts = []
    for cls in CLASS_ORDER:
        n = sum(t.failure_class is cls for t in found.tests)
        if n:
            parts.append(words[cls](n))
    return " · ".join(parts)


def ordered(tests: Sequence[ClassifiedFailure]) -> list[ClassifiedFailure]:
    """The classified failures, gating classes first (stable within a class)."""
    rank = {cls: i for i, cls in enumerate(CLASS_ORDER)}
    return sorted(tests, key=lambda t: rank[t.failure_class])


def known(view: JobView, test_id: str) -> KnownFlaky | None:
    """What the dashboard knows of `test_id` as a flaky test of this repository and backend."""
    return next((k for k in view.known_flaky if k.test_id == test_id), None)


def known_words(flaky: KnownFlaky) -> str:
    """`known flaky: 3 of 10 recent jobs`."""
    return f"known flaky: {flaky.flaky_jobs} of {plural(flaky.recent_jobs, 'recent job')}"
