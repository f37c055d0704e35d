"""Failures told apart in the report: the headline and each failure's line, the one gate
predicate and the status and check it decides, an older runner's result without classes,
the settings' `failures:` section, and the flaky tests kept when results arrive."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import httpx
import pytest

from report.checks import render_check, render_status
from report.comment import render_comment
from report.gate import failures_fail_gate
from report.summary import headline
from report.views import KnownFlaky
from service.queue.flaky import FlakyTests, known_flaky
from tests.service.helpers import (
    live_service,
    new_job,
    open_queue,
    service_settings,
    sqlite_at_head,
)
from tests.service.test_report import view
from workflows.models import (
    AccuracyResult,
    ClassifiedFailure,
    FailureClass,
    FailureClasses,
    JobResult,
    JobStatus,
    StepResult,
    StepStatus,
    TestFailure,
)
from workflows.repo_config import parse_repo_config

BASE = "0123456789abcdef0123456789abcdef01234567"
NEW, FLAKY, OLD = (f"tests/test_ops.py::test_{n}" for n in ("new", "flaky", "old"))
WHY = {
    NEW: (FailureClass.new, "failed 3 of 3 re-runs; passes on the merge base 0123456"),
    FLAKY: (FailureClass.flaky, "passed 2 of 3 re-runs"),
    OLD: (FailureClass.already_failing, "fails on the merge base 0123456 too"),
}


def failed_view(
    ids: tuple[str, ...] = (NEW, FLAKY, OLD),
    gate: tuple[FailureClass, ...] = (FailureClass.new,),
    classified: bool = True,
    **changes: object,
):
    """A failed job with `ids` failing, classified as WHY says (or by an older runner)."""
    base = view(JobStatus.failed, base_ref="main")
    assert base.result is not None
    acc = AccuracyResult(
        passed=60, failed=len(ids), failures=[TestFailure(test_id=i, message="boom") for i in ids]
    )
    found = FailureClasses(
        gate=list(gate),
        merge_base=BASE,
        duration_s=12.0,
        tests=[
            ClassifiedFailure(
                test_id=i, failure_class=WHY[i][0], why=WHY[i][1], reruns=3, rerun_failures=1
            )
            for i in ids
        ],
    )
    steps = [StepResult(name="accuracy", status=StepStatus.failed)]
    result = base.result.model_copy(
        update={"accuracy": acc, "failures": found if classified else None, "steps": steps}
    )
    return dataclasses.replace(base, result=result, **changes)


def test_headline_check_and_lines_say_each_class() -> None:
    v = failed_view()
    assert failures_fail_gate(v)
    line = headline(v)
    assert line.startswith("❌")
    assert "1 new failure · 1 flaky · 1 already failing on main · 3 failed, 60 passed" in line
    text = render_comment(v)
    assert "— **new**: failed 3 of 3 re-runs; passes on the merge base 0123456" in text
    assert "— **flaky**: passed 2 of 3 re-runs" in text
    assert "— **already failing**: fails on the merge base 0123456 too" in text
    assert text.index("test_new`") < text.index("test_flaky`") < text.index("test_old`")
    check = render_check(v)
    assert check.conclusion == "failure"
    assert check.title.startswith("1 new failure · 1 flaky · 1 already failing on main")
    assert render_status(v).state == "failure"


def test_failures_of_ungated_classes_leave_the_check_neutral() -> None:
    v = failed_view((FLAKY, OLD))
    assert not failures_fail_gate(v)
    assert render_check(v).conclusion == "neutral"
    assert render_status(v).state == "success"
    assert headline(v).startswith("⚠️")
    assert "these failures do not fail this check" in render_comment(v)


@pytest.mark.parametrize(
    ("gate", "fails"),
    [
        ((FailureClass.new,), False),
        ((FailureClass.new, FailureClass.flaky), True),
        ((FailureClass.already_failing,), True),
        ((), False),
    ],
)
def test_the_gate_follows_the_repository(gate: tuple[FailureClass, ...], fails: bool) -> None:
    v = failed_view((FLAKY, OLD), gate=gate)
    assert failures_fail_gate(v) is fails
    assert render_check(v).conclusion == ("failure" if fails else "neutral")


def test_unclassified_failures_count_as_new_and_other_failed_steps_still_fail() -> None:
    v = failed_view((FLAKY,))
    assert v.result is not None and v.result.failures is not None
    left = ClassifiedFailure(
        test_id=NEW, failure_class=FailureClass.unclassified, why="not re-run within the budget"
    )
    found = v.result.failures.model_copy(update={"tests": [*v.result.failures.tests, left]})
    unclassified = dataclasses.replace(v, result=v.result.model_copy(update={"failures": found}))
    assert failures_fail_gate(unclassified)
    assert "1 failure not classified" in headline(unclassified)
    assert v.result.accuracy is not None
    more = [*v.result.accuracy.failures, TestFailure(test_id=OLD, message="past the list")]
    acc = v.result.accuracy.model_copy(update={"failures": more})
    unlisted = dataclasses.replace(v, result=v.result.model_copy(update={"accuracy": acc}))
    assert failures_fail_gate(unlisted)
    steps = [*v.result.steps, StepResult(name="lint", status=StepStatus.failed)]
    other = dataclasses.replace(v, result=v.result.model_copy(update={"steps": steps}))
    assert failures_fail_gate(other)


def test_an_older_runners_result_renders_and_fails_as_before() -> None:
    v = failed_view(classified=False)
    assert failures_fail_gate(v)
    assert render_check(v).conclusion == "failure" and render_status(v).state == "failure"
    text = render_comment(v)
    assert "**new**" not in text and "re-run by node id" not in text
    assert "`tests/test_ops.py::test_new`: `boom`" in text
    # What the service stores of it reads back without the new field.
    stored = v.result.model_dump(mode="json") if v.result else {}
    assert stored["failures"] is None
    stored.pop("failures")
    assert JobResult.model_validate(stored).failures is None


def test_a_step_that_gave_no_verdict_is_said_to_be_infrastructure() -> None:
    base = view(JobStatus.errored)
    assert base.result is not None
    result = base.result.model_copy(
        update={
            "error_step": "accuracy",
            "error_message": "pytest exited 3",
            "failures": FailureClasses(infrastructure="pytest exited 3: not a test verdict"),
        }
    )
    v = dataclasses.replace(base, result=result)
    assert "infrastructure failure · errored in step accuracy" in headline(v)
    assert not failures_fail_gate(v)  # an error keeps its own conclusion
    assert render_check(v).conclusion == "failure"


def test_a_known_flaky_test_is_marked() -> None:
    v = failed_view(known_flaky=(KnownFlaky(NEW, 3, 10),))
    text = render_comment(v)
    assert "passes on the merge base 0123456 · known flaky: 3 of 10 recent jobs" in text


def test_the_settings_failures_section() -> None:
    reading = parse_repo_config("failures:\n  reruns: 3\n  budget_s: 60\n  gate: [new, flaky]\n")
    assert reading.ok
    failures = reading.config.failures
    assert (failures.reruns, failures.budget_s, failures.gate) == (3, 60, ["new", "flaky"])
    assert parse_repo_config("").config.failures.gate == ["new"]
    bad = parse_repo_config("failures:\n  gate: [new, red]\n  rerun: 3\n")
    assert [str(p) for p in bad.problems] == [
        'line 2: failures.gate.1: "red" is not a failure class: give new, already_failing, '
        "flaky, infrastructure",
        'line 3: failures: unknown key "rerun"; did you mean reruns? known: reruns, budget_s, '
        "max_tests, gate",
    ]
    assert bad.config.failures.reruns == 4  # a file with a problem counts as absent


def _flaky_result(*ids: str) -> JobResult:
    tests = [
        ClassifiedFailure(test_id=i, failure_class=FailureClass.flaky, why="x", reruns=4,
                          rerun_failures=1)
        for i in ids
    ] + [ClassifiedFailure(test_id=NEW, failure_class=FailureClass.new, why="x")]  # fmt: skip
    return JobResult(status=JobStatus.failed, sha="a" * 40, failures=FailureClasses(tests=tests))


def test_flaky_tests_are_kept_when_results_arrive(db_url: str) -> None:
    with open_queue(db_url) as store:
        runner_id, _ = store.runners.register("r1", ["cpu"])
        done = []
        for sha, flaky in (("a", (FLAKY,)), ("b", ()), ("c", (FLAKY, OLD))):
            job, _ = store.jobs.create_job(new_job(sha=sha * 40))
            assert store.jobs.claim(runner_id, ["cpu"]) is not None
            store.jobs.complete(runner_id, job.id, _flaky_result(*flaky))
            store.jobs.complete(runner_id, job.id, _flaky_result(*flaky))  # again: no change
            done.append(job)
        rows = {r.test_id: r for r in FlakyTests(store.db).listed()}
        assert set(rows) == {FLAKY, OLD}
        assert rows[FLAKY].flaky_jobs == 2 and rows[FLAKY].job_ids == (done[0].id, done[2].id)
        assert rows[FLAKY].flake_rate == pytest.approx(0.25)
        later, _ = store.jobs.create_job(new_job(sha="d" * 40))
        with store.db.reads() as session:
            marked = known_flaky(session, later, {FLAKY, OLD, NEW})
        assert marked == (KnownFlaky(FLAKY, 2, 3), KnownFlaky(OLD, 1, 3))
        assert FlakyTests(store.db).listed(hidden_repos={"octo/kernels"}) == []


def test_a_result_posted_by_a_runner_lists_its_flaky_test_on_the_dashboard(tmp_path: Path) -> None:
    settings = service_settings(sqlite_at_head(tmp_path / "flaky.db"), process_workers=False)
    with live_service(settings) as live:
        runner_id, token = live.register("runner-one", ["cpu"])
        job, _ = live.service.jobs.create_job(new_job())
        assert live.service.jobs.claim(runner_id, ["cpu"]) is not None
        body = _flaky_result(FLAKY).model_dump(mode="json")
        body["failures"]["from_a_newer_runner"] = 1  # left out, not refused
        done = httpx.post(
            f"{live.url}/api/v1/jobs/{job.id}/complete",
            json=body,
            headers={"Authorization": f"Bearer {token}"},
        )
        assert done.status_code == 200, done.text
        page = httpx.get(f"{live.url}/").text
    flaky = page.split('<table id="flaky">')[1].split("</table>")[0]
    assert FLAKY in flaky and "25 % of 4 re-runs" in flaky
    assert f'href="/jobs/{job.id}"' in flaky
