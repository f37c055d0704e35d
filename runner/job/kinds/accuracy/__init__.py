"""The accuracy step: the operator's tests under pytest with the runner's plugins loaded (the
checkout's operators, live progress, a proof log's counts, slowest tests first), read back as
the JUnit report; a failing run's failures re-run and classified (`reruns`, this package's
other module). No test
marked with the operator is a failed job that says so, with the operators the checkout does
know that come close."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

from runner.environment import compile_cache
from runner.job.kinds.accuracy.reruns import classify_failures
from runner.job.kinds.context import OP_NAME, StepContext, Stop, Tree, interrupted, step_result
from runner.job.steps import run_step
from runner.plugins import PLUGINS
from runner.results import results
from runner.results.progress import ProgressWatch, progress_file
from workflows.models import FailureClass, FailureClasses, JobStatus, StepStatus
from workflows.spec import Step

OPERATORS_FILE = "operators.json"
PYTEST_NO_TESTS = 5  # nothing selected: no test is marked with the operator
PYTEST_USAGE_ERROR = 4  # with --strict-markers, `-m unknown_marker` ends here
# Markers every pytest (and its common plugins) registers: not operators.
BUILTIN_MARKERS = frozenset(
    {
        "filterwarnings",
        "skip",
        "skipif",
        "xfail",
        "parametrize",
        "usefixtures",
        "tryfirst",
        "trylast",
        "timeout",
        "hypothesis",
        "anyio",
        "asyncio",
    }
)


def run(step: Step, job: StepContext, tree: Tree) -> None:
    """Run the tests and record the verdict; the JUnit report becomes `job.accuracy`."""
    artifacts = job.artifacts
    plugged = replace(tree, env=with_plugins(job, tree.env, step))
    with ProgressWatch(progress_file(artifacts), step.name, job.on_progress):
        outcome, values = job.run(step, plugged, artifacts)
    job.operators = read_operators(artifacts / OPERATORS_FILE)
    if outcome.timed_out:
        _no_verdict(job, step, f"the step timed out after {step.timeout_s}s")
    interrupted(job, step.name, outcome, step.timeout_s)
    code = outcome.exit_code
    unknown_marker = code == PYTEST_USAGE_ERROR and "Unknown marker" in outcome.tail
    if code == PYTEST_NO_TESTS or unknown_marker:
        job.unknown_op = True
        job.close_matches = known_ops(job, tree)
        message = f"no test is marked with {job.spec.op!r}"
        job.record(step_result(step.name, outcome, StepStatus.failed, message))
        raise Stop(JobStatus.failed, step.name, message)
    if code not in (0, 1):
        message = f"pytest exited {code}: not a test verdict (usage, collection or crash)"
        _no_verdict(job, step, message)
        job.record(step_result(step.name, outcome, StepStatus.errored, message))
        raise Stop(JobStatus.errored, step.name, message)
    path = Path(step.results_path(values) or "")
    try:
        job.accuracy = results.read_junit(tree.path / path, job.spec.op, tree.path)
    except results.ResultsError as exc:
        _no_verdict(job, step, str(exc))
        job.record(step_result(step.name, outcome, StepStatus.errored, str(exc)))
        raise Stop(JobStatus.errored, step.name, str(exc)) from exc
    acc = job.accuracy
    if step.proof is not None:
        acc.proof = results.read_proof(artifacts, step.proof.prefix)
        acc.proof.specialization = step.proof.specialization_of(tree.path, job.spec.op)
    status = StepStatus.succeeded if code == 0 else StepStatus.failed
    summary = None if code == 0 else f"{acc.failed} failed, {acc.errors} errors"
    job.record(step_result(step.name, outcome, status, summary))
    policy = job.settings().failures
    if code == 1 and acc.failures and policy.reruns > 0:
        job.failures = classify_failures(step, job, tree, acc, policy)


def _no_verdict(job: StepContext, step: Step, why: str) -> None:
    """The step itself gave no verdict (it crashed, could not collect, timed out): the job's
    failure is of the infrastructure, said with the repository's gate beside it."""
    gate = [FailureClass(g) for g in job.settings().failures.gate]
    job.failures = FailureClasses(step=step.name, gate=gate, infrastructure=why[:500])


def with_plugins(job: StepContext, env: dict[str, str], step: Step) -> dict[str, str]:
    """`env` with the runner's pytest plugins loaded, copied into the job's directory: the
    one that writes the checkout's operators (pytest_operators.py), the one that writes its
    progress (pytest_ondemand_progress.py), and where the step names a proof log, the one
    that counts its lines (pytest_proof.py)."""
    plugins = job.plugins
    plugins.mkdir(parents=True, exist_ok=True)
    names = ["pytest_operators", "pytest_ondemand_progress"]
    names += ["pytest_proof"] if step.proof else []
    durations = job.durations()
    if durations is not None:  # a trusted build's test times: slow tests first
        shutil.copyfile(durations, plugins / compile_cache.DURATIONS)
        names.append("pytest_order")
    for name in names:
        shutil.copyfile(PLUGINS / f"{name}.py", plugins / f"{name}.py")
    artifacts = job.artifacts
    addopts = [env.get("PYTEST_ADDOPTS"), *(f"-p {name}" for name in names)]
    extra = {
        "TEST_OPERATORS_FILE": str(artifacts / OPERATORS_FILE),
        "TEST_PROGRESS_FILE": str(progress_file(artifacts)),
    }
    if durations is not None:
        extra["TEST_DURATIONS_FILE"] = str(plugins / compile_cache.DURATIONS)
    if step.proof:
        extra |= {
            "TEST_PROOF_PREFIX": step.proof.prefix,
            "TEST_PROOF_LOGGER": step.proof.logger,
            "TEST_PROOF_DIR": str(artifacts),
        }
    return {
        **env,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(plugins), env.get("PYTHONPATH")])),
        "PYTEST_ADDOPTS": " ".join(filter(None, addopts)),
        **extra,
    }


def read_operators(path: Path) -> list[str]:
    """The operators the plugin wrote, checked (the file is the pull request's to write)."""
    try:
        names = json.loads(results.read_artifact(path, limit=1024 * 1024))
    except (OSError, ValueError):
        return []
    if not isinstance(names, list):
        return []
    found = {n for n in names if isinstance(n, str) and OP_NAME.match(n)}
    return sorted(found - BUILTIN_MARKERS)[:5000]


def known_ops(job: StepContext, tree: Tree) -> list[str]:
    """Close matches among the operators the checkout's tests know: what the plugin wrote
    during the step, else its registered pytest markers."""
    op = job.spec.op
    if job.operators:
        known = [m for m in job.operators if m not in BUILTIN_MARKERS and m != op]
        return results.close_matches(op, known)
    output = bytearray()
    run_step(
        job.confined([str(tree.python), "-m", "pytest", "--markers"]),
        cwd=tree.path,
        env=tree.env,
        timeout_s=120,
        on_output=output.extend,
        cancel=job.cancel,
    )
    text = output.decode("utf-8", "replace")
    markers = [
        m
        for m in results.markers_from_pytest_output(text)
        if m not in BUILTIN_MARKERS and m != op  # registered but with no test
    ]
    return results.close_matches(op, markers)
