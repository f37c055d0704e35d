"""A failing accuracy step's failures told apart: a whole job on a repository whose tests fail
by design (one of each class, the re-runs and gate from its merge base's settings), and the
pure classifier and node-id check it rests on."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from runner.job.execute import JobContext, execute
from runner.job.workspace import Workspaces
from runner.results.failures import Evidence, Outcome, classify, rerunnable
from tests.runner.failrepo import OP, FailRepo, make_fail_repo
from workflows.models import FailureClass, JobSpec, JobStatus, StepStatus
from workflows.spec import load_workflows

CPU = load_workflows()["cpu"]
BASE = "0123456789abcdef0123456789abcdef01234567"
ID = "tests/kernels/test_ops.py::test_x[float16-1e-05]"


@pytest.fixture(scope="module")
def fail_repo(tmp_path_factory: pytest.TempPathFactory) -> FailRepo:
    return make_fail_repo(tmp_path_factory.mktemp("origin") / "failops")


def test_each_class_from_real_reruns(
    fail_repo: FailRepo, runner_cache: Path, tmp_path: Path
) -> None:
    spec = JobSpec(
        id=5, repo="o/failops", clone_url=str(fail_repo.path), pr_number=9,
        sha=fail_repo.head_sha, base_sha=fail_repo.base_sha, op=OP, backend="cpu",
        options={"bench": False},
    )  # fmt: skip
    log = bytearray()
    ctx = JobContext(
        workspaces=Workspaces(runner_cache), env_cache=runner_cache / "envs",
        job_dir=tmp_path / "job", runner_name="t", runner_version="0",
        on_output=log.extend, cancel=threading.Event(), grace_s=1,
    )  # fmt: skip
    result = execute(spec, CPU, ctx)
    assert result.status is JobStatus.failed, log.decode()[-3000:]
    found = result.failures
    assert found is not None and found.infrastructure is None
    assert found.merge_base == fail_repo.base_sha
    # The merge base's settings, not the defaults: two re-runs, new and infrastructure gate.
    assert found.gate == [FailureClass.new, FailureClass.infrastructure]
    by_test = {t.test_id.rpartition("::")[2]: t for t in found.tests}
    assert set(by_test) == {"test_flaky", "test_old", "test_new", "test_crash"}
    assert by_test["test_flaky"].failure_class is FailureClass.flaky
    assert by_test["test_flaky"].why == "passed 2 of 2 re-runs"
    assert by_test["test_old"].failure_class is FailureClass.already_failing
    assert by_test["test_old"].why.startswith(f"fails on the merge base {fail_repo.base_sha[:7]}")
    assert by_test["test_new"].failure_class is FailureClass.new
    assert by_test["test_new"].why.endswith(f"passes on the merge base {fail_repo.base_sha[:7]}")
    assert by_test["test_new"].reruns == by_test["test_new"].rerun_failures == 2
    assert by_test["test_crash"].failure_class is FailureClass.infrastructure
    assert "pytest exited 3" in by_test["test_crash"].why
    reruns = next(s for s in result.steps if s.name == "accuracy (re-runs)")
    assert reruns.status is StepStatus.succeeded
    assert "1 new, 1 flaky, 1 already_failing, 1 infrastructure" in (reruns.message or "")


def _seen(*outcomes: str, base: str | None = None, message: str = "") -> Evidence:
    return Evidence(
        ID,
        tuple(Outcome(o) for o in outcomes),
        Outcome(base) if base else None,
        message,
        "pytest exited 3" if "none" in outcomes else "",
    )


@pytest.mark.parametrize(
    ("evidence", "merge_base", "cls", "why"),
    [
        (_seen("failed", "passed", "passed"), BASE, FailureClass.flaky, "passed 2 of 3 re-runs"),
        (_seen("passed"), None, FailureClass.flaky, "passed 1 of 1 re-run"),
        (
            _seen("failed", "failed", "failed", base="failed"), BASE,
            FailureClass.already_failing,
            "fails on the merge base 0123456 too (failed 3 of 3 re-runs)",
        ),
        (
            _seen("failed", "failed", "none", base="passed"), BASE, FailureClass.new,
            "failed 2 of 2 re-runs; passes on the merge base 0123456",
        ),
        (
            _seen("none", "none"), BASE, FailureClass.infrastructure,
            "2 re-runs gave no verdict (pytest exited 3)",
        ),
        (
            _seen("none", message="worker 'gw3' crashed while running"), BASE,
            FailureClass.infrastructure,
            "its worker crashed; 1 re-run gave no verdict (pytest exited 3)",
        ),
        (
            _seen("failed", "failed"), None, FailureClass.unclassified,
            "failed 2 of 2 re-runs; no merge base to compare with",
        ),
        (
            _seen("failed", base="none"), BASE, FailureClass.unclassified,
            "failed 1 of 1 re-run; gave no verdict on the merge base 0123456",
        ),
        (_seen(), BASE, FailureClass.unclassified, "not re-run"),
    ],
)  # fmt: skip
def test_classify(evidence: Evidence, merge_base: str | None, cls: FailureClass, why: str) -> None:
    found = classify(evidence, merge_base)
    assert (found.failure_class, found.why) == (cls, why)


def test_a_test_failing_every_rerun_is_never_flaky() -> None:
    for base in ("failed", "passed", None):
        found = classify(_seen("failed", "failed", "failed", "failed", base=base), BASE)
        assert found.failure_class is not FailureClass.flaky


@pytest.mark.parametrize(
    "test_id",
    [
        "--help::x", "-p::x", "/etc/passwd.py::x", "tests/../../x.py::t", "tests/x.py",
        "tests/x.py::", "tests/x.txt::t", "tests/x.py::t\nmore", "tests//x.py::t",
        "tests/x.py::t\x00", "a" * 1001,
    ],
)  # fmt: skip
def test_hostile_node_ids_are_never_rerun(test_id: str) -> None:
    assert not rerunnable(test_id)


def test_node_ids_rerun_only_from_files_in_the_checkout(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_ops.py").write_text("")
    (tmp_path / "tests" / "test_link.py").symlink_to(tmp_path / "tests" / "test_ops.py")
    assert rerunnable("tests/test_ops.py::TestA::test_x[a b-1e-05]", tmp_path)
    assert not rerunnable("tests/test_gone.py::test_x", tmp_path)
    assert not rerunnable("tests/test_link.py::test_x", tmp_path)
