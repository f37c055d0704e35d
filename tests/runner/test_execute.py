"""A whole job on the tiny repository with the real cpu workflow: checkout, environment, pytest,
the benchmark, the merge-base comparison, and every way a job ends."""

from __future__ import annotations

import base64
import json
import socket
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from runner.job.execute import JobContext, execute
from runner.job.sandboxing import Jail, jail_for_host
from runner.job.workspace import Workspaces
from sandbox.app import create_app
from sandbox.client import SandboxAdmin
from tests.runner.tinyrepo import BENCH, TinyRepo, make_tiny_repo
from tests.support.git import git
from tests.support.live import live_server
from workflows.models import JobResult, JobSpec, JobStatus, StepStatus
from workflows.spec import ProofLog, Step, StepKind, WorkflowSpec, load_workflows

CPU = load_workflows()["cpu"]


def _spec(repo: TinyRepo, op: str, **kw: object) -> JobSpec:
    return JobSpec.model_validate(
        {
            "id": 1,
            "repo": "o/tinyops",
            "clone_url": str(repo.path),
            "pr_number": 7,
            "sha": repo.head_sha,
            "op": op,
            "backend": "cpu",
            **kw,
        }
    )


def _run(
    repo: TinyRepo,
    cache: Path,
    tmp_path: Path,
    op: str,
    workflow: WorkflowSpec = CPU,
    cancel: threading.Event | None = None,
    jail: Jail | None = None,
    log: bytearray | None = None,
    on_step_start: Callable[[int], None] | None = None,
    **kw: object,
) -> tuple[JobResult, str]:
    log = bytearray() if log is None else log
    ctx = JobContext(
        workspaces=Workspaces(cache),
        env_cache=cache / "envs",
        job_dir=tmp_path / "job",
        runner_name="test-runner",
        runner_version="0",
        on_output=log.extend,
        cancel=cancel or threading.Event(),
        jail=jail,
        grace_s=1,
        on_step_start=on_step_start,
    )
    result = execute(_spec(repo, op, **kw), workflow, ctx)
    return result, log.decode()


def _with_timeout(seconds: int) -> WorkflowSpec:
    steps = [s.model_copy(update={"timeout_s": seconds}) for s in CPU.steps]
    return CPU.model_copy(update={"steps": steps})


def test_passing_operator_with_benchmark_against_the_merge_base(
    tiny_repo: TinyRepo, runner_cache: Path, tmp_path: Path
) -> None:
    result, log = _run(tiny_repo, runner_cache, tmp_path, "good_op", base_ref="main")
    assert result.status is JobStatus.succeeded, log
    assert result.sha == tiny_repo.head_sha
    acc = result.accuracy
    assert acc is not None
    assert (acc.passed, acc.failed, acc.skipped) == (3, 0, 2)
    assert [(s.reason, s.count) for s in acc.skips] == [("output_size > input size", 2)]
    assert acc.implementation == "kernels.ops.good_op.good_op"
    bench = result.benchmark
    assert bench is not None and len(bench.rows) == 4
    assert bench.arithmetic_mean_speedup == pytest.approx(2.0)
    assert bench.before_arithmetic_mean_speedup == pytest.approx(1.5)
    assert all(r.before_speedup == pytest.approx(1.5) for r in bench.rows)
    assert bench.performance is False
    names = [s.name for s in result.steps]
    assert names == ["checkout", "environment", "accuracy", "benchmark", "benchmark (merge base)"]
    assert all(s.status is StepStatus.succeeded for s in result.steps)
    env = result.environment
    assert env.runner_name == "test-runner" and env.vendor == "cpu"
    assert env.torch and env.triton and env.python
    assert result.duration_s is not None and result.duration_s > 0
    assert "3 passed, 2 skipped" in log
    # The worktrees are gone afterwards.
    assert not (tmp_path / "job" / "src").exists() and not (tmp_path / "job" / "base").exists()


def test_a_private_repository_is_checked_out_with_the_jobs_read_token(
    tiny_repo: TinyRepo, runner_cache: Path, tmp_path: Path
) -> None:
    """The repository behind a sandbox that asks for credentials, as GitHub does for a
    private one: the job's token fetches the pull request and, with it, the merge base, so
    the comparison still runs when the token stops working once the steps start (a read
    token lives an hour; an accuracy step may take longer). The token appears in nothing the
    job reports; with no token the checkout errors, saying why."""
    with live_server(create_app()) as url, SandboxAdmin(url) as admin:
        admin.create_user("o", "Organization")
        admin.create_user("reader")
        admin.create_repo("o", "tinyops", str(tiny_repo.path), private=True)
        admin.set_permission("o/tinyops", "reader", "read")
        token = admin.create_token("reader")
        clone = f"{url}/o/tinyops.git"
        # A step that shows what a pull request's code could read: its environment and git's.
        snoop = Step(
            name="snoop",
            argv=["{python}", "-c", "import os, subprocess; print(dict(os.environ)); "
                  "subprocess.run(['git', 'config', '--list', '--show-origin'])"],
        )  # fmt: skip
        workflow = CPU.model_copy(update={"steps": [snoop, *CPU.steps]})
        result, log = _run(
            tiny_repo,
            runner_cache,
            tmp_path,
            "good_op",
            workflow,
            on_step_start=lambda _: admin.set_permission("o/tinyops", "reader", "none"),
            base_ref="main",
            clone_url=clone,
            git_token=token,
        )
        assert result.status is JobStatus.succeeded, log
        assert result.steps[-1].name == "benchmark (merge base)"
        assert result.steps[-1].status is StepStatus.succeeded
        assert "'HOME'" in log  # the snoop step printed its environment (unredacted here)
        basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        assert token not in log and basic not in log and token not in result.model_dump_json()
        cold = tmp_path / "cold"  # a runner whose mirror does not have the commit yet
        admin.set_permission("o/tinyops", "reader", "read")
        denied, text = _run(tiny_repo, cold, cold, "good_op", clone_url=clone)
        assert denied.status is JobStatus.errored
        assert denied.steps[0].name == "checkout"
        assert "Authentication failed" in (denied.error_message or "") + text


def _with_proof(logger: str, specialization: tuple[str, ...] = ()) -> WorkflowSpec:
    proof = {"prefix": "TINY_PROOF", "logger": logger, "specialization": list(specialization)}
    steps = [
        s.model_copy(update={"proof": ProofLog.model_validate(proof)})
        if s.kind is StepKind.accuracy
        else s
        for s in CPU.steps
    ]
    return CPU.model_copy(update={"steps": steps})


def test_the_proof_log_counts_the_paths_that_ran(
    tiny_repo: TinyRepo, runner_cache: Path, tmp_path: Path
) -> None:
    """The accuracy report names each logged path with its count, though the test's logger
    was never set to debug; an operator that logs nothing gets an empty proof."""
    workflow = _with_proof("tinyops.vendor")
    result, log = _run(
        tiny_repo, runner_cache, tmp_path, "good_op", workflow, options={"bench": False}
    )
    assert result.status is JobStatus.succeeded, log
    assert result.accuracy is not None and result.accuracy.proof is not None
    lines = [(p.message, p.count) for p in result.accuracy.proof.lines]
    assert lines == [("TINY_PROOF GOOD_OP path=a", 2), ("TINY_PROOF GOOD_OP path=b", 1)]

    assert result.accuracy.proof.specialization is None  # none named

    # Nothing logged where the checkout holds a specialization of the operator (the first
    # path of the workflow's list that exists, `{op}` the operator): the report warns.
    where = ("kernels/{op}/missing.py", "tests/kernels/test_ops.py", "tests/{op}")
    result, log = _run(
        tiny_repo,
        runner_cache,
        tmp_path / "other",
        "good_op",
        _with_proof("elsewhere", where),
        options={"bench": False},
    )
    assert result.accuracy is not None and result.accuracy.proof is not None, log
    assert result.accuracy.proof.prefix == "TINY_PROOF" and result.accuracy.proof.lines == []
    assert result.accuracy.proof.specialization == "tests/kernels/test_ops.py"


def test_failing_operator(tiny_repo: TinyRepo, runner_cache: Path, tmp_path: Path) -> None:
    # Its base's settings re-run nothing (tiny_repo): the failure classes are another test's.
    result, _ = _run(
        tiny_repo, runner_cache, tmp_path, "bad_op", base_sha=tiny_repo.base_sha,
        options={"bench": False},
    )  # fmt: skip
    assert result.status is JobStatus.failed
    acc = result.accuracy
    assert acc is not None and (acc.passed, acc.failed) == (1, 1)
    failure = acc.failures[0]
    assert failure.test_id == "tests/kernels/test_ops.py::test_bad_value"
    assert "mismatch | at `index` 7" in failure.message
    assert "assert" in failure.traceback_tail
    assert acc.implementation == "kernels.backends._cpu.ops.bad_op"
    steps = {s.name: s for s in result.steps}
    assert steps["accuracy"].status is StepStatus.failed
    assert steps["accuracy"].exit_code == 1
    assert steps["benchmark"].status is StepStatus.skipped
    assert steps["benchmark"].message == "--no-bench"
    assert result.benchmark is None
    # the operators the checkout's tests know, for the service to check commands against
    assert {"good_op", "bad_op", "slow_op", "env_op"} <= set(result.operators)
    assert "parametrize" not in result.operators  # pytest's own markers are not operators


def test_unknown_operator_gets_close_matches(
    tiny_repo: TinyRepo, runner_cache: Path, tmp_path: Path
) -> None:
    result, _ = _run(tiny_repo, runner_cache, tmp_path, "good_opp")
    assert result.status is JobStatus.failed
    assert result.unknown_op
    assert result.close_matches[0] == "good_op"
    assert "skipif" not in result.close_matches
    assert [s.name for s in result.steps][-1] == "accuracy"  # no benchmark of nothing


def test_step_timeout_kills_and_reports(
    tiny_repo: TinyRepo, runner_cache: Path, tmp_path: Path
) -> None:
    pidfile = tmp_path / "child.pid"
    workflow = _with_timeout(3)  # the step's pytest starts and writes the pid well within it
    workflow = workflow.model_copy(update={"env": {**CPU.env, "SLOW_PIDFILE": str(pidfile)}})
    result, log = _run(tiny_repo, runner_cache, tmp_path, "slow_op", workflow)
    assert result.status is JobStatus.timed_out
    assert result.error_step == "accuracy"
    assert "timed out after 3s" in (result.error_message or "")
    # The step gave no verdict: the job's, not a test's (infrastructure), nothing re-run.
    assert result.failures is not None and not result.failures.tests
    assert result.failures.infrastructure == "the step timed out after 3s"
    step = result.steps[-1]
    assert step.status is StepStatus.timed_out
    assert step.exit_code is not None and step.exit_code < 0
    assert "step accuracy: exit -15" in log
    # The test's own child, in the step's process group, was killed with it.
    child = int(pidfile.read_text())
    assert not Path(f"/proc/{child}").exists() or " Z " in Path(f"/proc/{child}/stat").read_text()


def test_cancellation(tiny_repo: TinyRepo, runner_cache: Path, tmp_path: Path) -> None:
    cancel = threading.Event()
    log = bytearray()

    def cancel_once_the_step_runs() -> None:
        deadline = time.monotonic() + 60
        while b"step accuracy:" not in log and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)
        cancel.set()

    threading.Thread(target=cancel_once_the_step_runs, daemon=True).start()
    result, _ = _run(tiny_repo, runner_cache, tmp_path, "slow_op", cancel=cancel, log=log)
    assert result.status is JobStatus.cancelled
    assert result.steps[-1].status is StepStatus.cancelled
    assert result.duration_s is not None and result.duration_s < 60


def test_bad_sha_errors_at_checkout(
    tiny_repo: TinyRepo, runner_cache: Path, tmp_path: Path
) -> None:
    result, _ = _run(tiny_repo, runner_cache, tmp_path, "good_op", sha="f" * 40)
    assert result.status is JobStatus.errored
    assert result.error_step == "checkout"
    assert "not found" in (result.error_message or "")


def test_steps_see_a_scrubbed_environment_and_no_network(
    tiny_repo: TinyRepo,
    runner_cache: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ONDEMAND_RUNNER_TOKEN", "very-secret")
    monkeypatch.setenv("SOME_CLOUD_KEY", "also-secret")
    server = socket.create_server(("127.0.0.1", 0))
    artifacts = tmp_path / "seen"
    artifacts.mkdir()
    env = {**CPU.env, "ARTIFACTS_DIR": str(artifacts), "PROBE_PORT": str(server.getsockname()[1])}
    workflow = CPU.model_copy(update={"env": env})
    jail = jail_for_host(None, network=True)
    result, log = _run(
        tiny_repo,
        runner_cache,
        tmp_path,
        "env_op",
        workflow,
        jail=jail,
        options={"bench": False},
    )
    server.close()
    assert result.status is JobStatus.succeeded, log
    seen = json.loads((artifacts / "env.json").read_text())
    assert "very-secret" not in seen.values() and "also-secret" not in seen.values()
    assert seen["HOME"] == str(tmp_path / "job" / "home")
    assert seen["KERNELS_VENDOR"] == "cpu" and seen["TRITON_INTERPRET"] == "1"
    if jail is not None:
        assert json.loads((artifacts / "net.json").read_text()) == {"reached": False}


def test_vs_a_ref_compares_with_that_commit_not_the_merge_base(
    runner_cache: Path, tmp_path: Path
) -> None:
    """`/test OP vs REF`: a release on a branch the pull request never forked from (its
    kernel 1.0x) is what "before" means, not the merge base (1.5x)."""
    repo = make_tiny_repo(tmp_path / "repo")
    git(repo.path, "checkout", "-q", "-b", "release", repo.base_sha)
    (repo.path / "kernels" / "benchmark" / "__main__.py").write_text(
        textwrap.dedent(BENCH.format(speedup=1.0))
    )
    git(repo.path, "commit", "-q", "-am", "release: a 1.0x kernel")
    release = git(repo.path, "rev-parse", "HEAD")
    git(repo.path, "checkout", "-q", "main")
    options = {"exact_base": True}
    result, log = _run(repo, runner_cache, tmp_path, "good_op", base_sha=release, options=options)
    assert result.status is JobStatus.succeeded, log
    bench = result.benchmark
    assert bench is not None and bench.merge_base == release
    assert bench.before_arithmetic_mean_speedup == pytest.approx(1.0)
    assert bench.arithmetic_mean_speedup == pytest.approx(2.0)
