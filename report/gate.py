"""The gate's decision, in one place: whether a job's result fails its commit status and check
run. Two gates: the regression gate (`gate_failed`: under the repository's `gate: fail`, a row
slower than on the merge base beyond the noise, not accepted by a maintainer) and the failure
gate (`failures_fail_gate`: a failed job fails unless every failure is of a class the
repository's `failures.gate` leaves out); and the performance signal beside the verdict
(`performance_dropped`). The comment, the status, the check run, the head's check and
`ondemand run`'s exit status all ask these. Pure: plain functions over the view.
"""

from __future__ import annotations

from report.failures import classes
from report.verdicts import Judged, Verdict, judged_rows, of
from report.views import JobView
from workflows.models import BenchmarkResult, FailureClass, FailureClasses, JobStatus, StepStatus

MAX_NODE_ID = 1000  # as `ClassifiedFailure.test_id` keeps it

# A kernel slower than the framework's overall, beyond this, is a performance drop too.
NOISE = 0.10


def compared(view: JobView) -> list[Judged]:
    """The rows compared with the merge base and their verdicts at the view's threshold
    (none under the interpreter, or with `--no-compare`)."""
    result = view.result
    if not view.bench or not view.compare or result is None or result.benchmark is None:
        return []
    if not result.benchmark.performance:
        return []
    return judged_rows(result.benchmark, view.threshold)


def slower_rows(view: JobView) -> list[Judged]:
    """Rows slower than on the merge base beyond the noise, slowest first."""
    return of(compared(view), Verdict.slower)


def gate_failed(view: JobView) -> bool:
    """The repository's gate fails the job: `gate: fail`, a significant regression, and no
    maintainer has accepted it (in a job that passed, or whose failures do not fail it)."""
    if view.gate != "fail" or view.accepted_by or not _tests_pass_gate(view):
        return False
    return bool(slower_rows(view))


def _tests_pass_gate(view: JobView) -> bool:
    """The tests' verdict does not fail the job: it passed, or its failures are of classes
    the repository does not gate on (`failures_fail_gate`)."""
    if view.status is JobStatus.succeeded:
        return True
    return view.status is JobStatus.failed and not failures_fail_gate(view)


def regression_accepted(view: JobView) -> bool:
    return bool(view.accepted_by) and view.gate == "fail" and bool(slower_rows(view))


def performance_dropped(view: JobView) -> bool:
    """The performance signal beside the verdict: a row slower than on the merge base, or a
    kernel slower than the reference overall (geometric mean below one, beyond the noise)."""
    result = view.result
    if not view.bench or result is None or result.benchmark is None:
        return False
    bench = result.benchmark
    if not bench.performance or not bench.rows:
        return False
    if slower_rows(view):
        return True
    _, geo = speedup_means(bench)
    return geo is not None and geo < 1 - NOISE


def speedup_means(bench: BenchmarkResult) -> tuple[float | None, float | None]:
    """The arithmetic and geometric mean speedups: the runner's, else computed from the rows."""
    arith, geo = bench.arithmetic_mean_speedup, bench.geometric_mean_speedup
    if arith is None or geo is None:
        computed = BenchmarkResult.means([r.speedup for r in bench.rows])
        arith = arith if arith is not None else computed[0]
        geo = geo if geo is not None else computed[1]
    return arith, geo


def gating(found: FailureClasses) -> frozenset[FailureClass]:
    """The classes that fail the gate: the repository's, with *unclassified* beside *new* (a
    failure not told apart is taken as the pull request's)."""
    gate = set(found.gate)
    if FailureClass.new in gate:
        gate.add(FailureClass.unclassified)
    return frozenset(gate)


def failures_fail_gate(view: JobView) -> bool:
    """Whether a job's accuracy failures fail its gate: a failed job fails it unless its
    runner classified every failure and none is of a class the repository's `failures.gate`
    names (or another step than the classified one failed). Jobs that did not fail (passed,
    errored, timed out, cancelled) are not judged here."""
    if view.status is not JobStatus.failed:
        return False
    found = classes(view)
    if found is None or not found.tests or found.infrastructure:
        return True
    result = view.result
    assert result is not None
    if any(s.status is StepStatus.failed and s.name != found.step for s in result.steps):
        return True
    gate = gating(found)
    if result.accuracy is not None and FailureClass.unclassified in gate:
        listed = {t.test_id for t in found.tests}
        if any(f.test_id[:MAX_NODE_ID] not in listed for f in result.accuracy.failures):
            return True  # a failure past the list is not classified: taken as new
    return any(t.failure_class in gate for t in found.tests)
