"""After a failing accuracy step: each failing test re-run by node id on the head a few times,
then those that never passed once on the merge base, within the repository's budget
(`failures:` in its settings file at the base); `runner/results/failures.py` classifies what
the re-runs said. A re-run is one pytest process per round over every test still asked about
(`runner/plugins/pytest_ondemand_rerun.py` keeps just those), the node ids checked before
pytest sees them and passed after `--`."""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from runner.job.kinds.context import StepContext, Tree, base_side
from runner.job.steps import run_step
from runner.plugins import PLUGINS
from runner.results import results
from runner.results.failures import Evidence, Outcome, classify, counts, rerunnable
from workflows.models import (
    AccuracyResult,
    FailureClass,
    FailureClasses,
    Progress,
    StepResult,
    StepStatus,
)
from workflows.repo_config import FailuresSection
from workflows.spec import Step

PLUGIN = "pytest_ondemand_rerun"
IDS_FILE = "rerun-ids.json"
MAX_LISTED = 1000  # failures classified at most (`FailureClasses.tests`)
MIN_ROUND_S = 2.0  # a round started with less of the budget left would only time out
LOG_HEAD, LOG_TAIL = 4096, 12288  # bytes of a re-run's output the job's log keeps
KEPT_OPTIONS = ("-p", "-o")  # the step's plugin switches and ini overrides, kept for re-runs


@dataclass
class _Asked:
    """One failing test while it is re-run: its first message and what each round said."""

    test_id: str
    message: str
    head: list[Outcome] = field(default_factory=list)
    base: Outcome | None = None
    no_verdict: str = ""


@dataclass
class Round:
    """A re-run's outcome per node id asked, and why where it gave none."""

    outcomes: dict[str, Outcome]
    no_verdict: str = ""
    out_of_time: bool = False  # stopped by the budget or a cancel: says nothing of the tests
    crashed: bool = False  # its process ended without a report: no test has a verdict
    why: dict[str, str] = field(default_factory=dict)  # a test's own reason for no verdict


def classify_failures(
    step: Step, job: StepContext, tree: Tree, acc: AccuracyResult, policy: FailuresSection
) -> FailureClasses:
    """Re-run the step's failing tests and classify each; the step's timeline gets one line
    (`accuracy (re-runs)`). Never raises for what a re-run did."""
    started = time.monotonic()
    deadline = started + policy.budget_s
    job.on_progress(Progress(step=f"{step.name} (re-runs)"))  # the comment shows it live
    gate = [FailureClass(g) for g in policy.gate]
    asked, skipped = _chosen(acc, tree, policy)
    options = _kept_options(job.argv_for(step, tree, job.artifacts)[0])
    budget_note = f"not re-run within the budget ({policy.budget_s} s)"
    _head_rounds(job, tree, asked, options, deadline, policy.reruns if asked else 0)
    merge_base, base_unrun = _base_round(job, step, asked, options, deadline, budget_note)
    tests = [
        classify(
            Evidence(a.test_id, tuple(a.head), a.base, a.message, a.no_verdict),
            merge_base,
            budget_note if not a.head else (base_unrun or budget_note),
        )
        for a in asked
    ]
    tests += [classify(Evidence(test_id), merge_base, why) for test_id, why in skipped.items()]
    elapsed = time.monotonic() - started
    found = FailureClasses(
        step=step.name,
        gate=gate,
        tests=tests,
        merge_base=merge_base,
        duration_s=round(elapsed, 3),
    )
    _record(job, step, found, max((len(a.head) for a in asked), default=0))
    return found


def _chosen(
    acc: AccuracyResult, tree: Tree, policy: FailuresSection
) -> tuple[list[_Asked], dict[str, str]]:
    """The failing tests to re-run (each once, within `max_tests`), and those that are not,
    with why (test id → why); at most MAX_LISTED in all."""
    asked: list[_Asked] = []
    skipped: dict[str, str] = {}  # test id → why it is not re-run
    for failure in acc.failures:
        if len(asked) + len(skipped) >= MAX_LISTED:
            break  # the rest are not listed: the gate counts them as not classified
        if failure.test_id in skipped or any(a.test_id == failure.test_id for a in asked):
            continue
        if not rerunnable(failure.test_id, tree.path):
            skipped[failure.test_id] = "not a node id that can be re-run"
        elif len(asked) >= policy.max_tests:
            skipped[failure.test_id] = f"past the {policy.max_tests} failing tests re-run"
        else:
            asked.append(_Asked(failure.test_id, failure.message))
    return asked, skipped


def _head_rounds(
    job: StepContext,
    tree: Tree,
    asked: list[_Asked],
    options: list[str],
    deadline: float,
    reruns: int,
) -> None:
    """Up to `reruns` rounds on the head, each over the tests still asked about, until the
    budget ends; each round's outcome added to each test's `head`. A round whose process
    crashed is run again a test at a time, and a test that crashes even alone is asked no
    more."""
    dropped: set[str] = set()  # gave no verdict even alone: asked no more
    for n in range(reruns):
        ids = [a.test_id for a in asked if a.test_id not in dropped]
        said = _round(job, tree, ids, options, deadline, f"head-{n + 1}") if ids else None
        if said is None or said.out_of_time:
            break
        if said.crashed and len(ids) > 1:  # one test may have taken the process down: alone
            alone = [_round(job, tree, [i], options, deadline, f"head-{n + 1}-{k}")
                     for k, i in enumerate(ids)]  # fmt: skip
            if any(r.out_of_time for r in alone):
                break
            said = Round(
                {i: r.outcomes.get(i, Outcome.none) for i, r in zip(ids, alone, strict=True)}
            )
            for i, r in zip(ids, alone, strict=True):
                if r.crashed:
                    dropped.add(i)
                    said.why[i] = r.no_verdict
        elif said.crashed:
            dropped.update(ids)
        for a in asked:
            if a.test_id not in ids:
                continue
            outcome = said.outcomes.get(a.test_id, Outcome.none)
            a.head.append(outcome)
            if outcome is Outcome.none:
                why = said.why.get(a.test_id) or said.no_verdict or "not reported"
                a.no_verdict = a.no_verdict or why


def _base_round(
    job: StepContext,
    step: Step,
    asked: list[_Asked],
    options: list[str],
    deadline: float,
    budget_note: str,
) -> tuple[str | None, str]:
    """The tests that failed and never passed on the head, re-run once on the merge base
    (each one's `base` set); the merge base's commit (None without one), and why its round
    did not run ("" where it did)."""
    merge_base = None
    base_unrun = budget_note
    failing = [a for a in asked if Outcome.passed not in a.head and Outcome.failed in a.head]
    if failing and not job.cancel.is_set():
        base = job.base_tree(step)
        if base is not None:
            merge_base = base.sha
            base_env = None
            if deadline - time.monotonic() >= MIN_ROUND_S:
                base_env = base_side(job, step, base)
                base_unrun = "its environment could not be made" if base_env is None else ""
            if base_env is not None:
                ids = [a.test_id for a in failing if rerunnable(a.test_id, base_env.path)]
                said = _round(job, base_env, ids, options, deadline, "base") if ids else None
                for a in failing:
                    if said is None or said.out_of_time:
                        continue
                    a.base = said.outcomes.get(a.test_id, Outcome.none)
                    if a.test_id not in ids:
                        a.base = Outcome.none  # its file is not on the merge base: not a verdict
    return merge_base, base_unrun


def _record(job: StepContext, step: Step, found: FailureClasses, rounds: int) -> None:
    """The re-runs' line in the step's timeline and the job's log: how many rounds, on what,
    and how many tests of each class."""
    words = ", ".join(f"{n} {cls.value}" for cls, n in counts(found.tests).items())
    message = f"{rounds} re-runs on the head"
    if found.merge_base:
        message += f", the merge base {found.merge_base[:7]}"
    job.record(
        StepResult(
            name=f"{step.name} (re-runs)",
            status=StepStatus.succeeded,
            duration_s=found.duration_s,
            message=f"{message}: {words}" if words else message,
        )
    )
    job.log(f"{step.name} (re-runs): {message}: {words or 'nothing to classify'}")


def _kept_options(argv: Sequence[str]) -> list[str]:
    """The step's `-p NAME` and `-o KEY=VALUE` pairs (its plugins switched off or on, its ini
    overrides), which its re-runs keep; its paths, markers and report options they do not."""
    kept: list[str] = []
    for option, value in itertools.pairwise(argv):
        if option in KEPT_OPTIONS and not value.startswith("-"):
            kept += [option, value]
    return kept


def _round(
    job: StepContext,
    tree: Tree,
    ids: list[str],
    options: list[str],
    deadline: float,
    name: str,
) -> Round:
    """One pytest process over `ids` in `tree`, at most until `deadline` (none, out of time,
    where too little of it is left or the job was cancelled)."""
    if job.cancel.is_set() or deadline - time.monotonic() < MIN_ROUND_S:
        return Round({}, out_of_time=True)
    plugins = job.plugins
    plugins.mkdir(parents=True, exist_ok=True)
    (plugins / f"{PLUGIN}.py").write_bytes((PLUGINS / f"{PLUGIN}.py").read_bytes())
    ids_file = plugins / IDS_FILE
    ids_file.write_text(json.dumps(ids))
    report = job.artifacts / f"rerun-{name}.xml"
    files = sorted({test_id.partition("::")[0] for test_id in ids})
    argv = [
        str(tree.python), "-m", "pytest", "-q", "--tb=no", "-p", "no:cacheprovider", *options,
        "-p", PLUGIN, f"--junitxml={report}", "--", *files,
    ]  # fmt: skip
    env = {
        **tree.env,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(plugins), tree.env.get("PYTHONPATH")])),
        "TEST_RERUN_IDS": str(ids_file),
    }
    timeout = max(1, int(deadline - time.monotonic()))
    job.log(f"re-run {name}: {len(ids)} tests (at most {timeout}s)")
    output = _Kept()
    outcome = run_step(
        job.confined(argv),
        cwd=tree.path,
        env=env,
        timeout_s=timeout,
        on_output=output.add,
        cancel=job.cancel,
        grace_s=job.grace_s,
    )
    job.on_output(output.text())
    job.log(f"re-run {name}: exit {outcome.exit_code} in {outcome.duration_s:.1f}s")
    if outcome.timed_out or outcome.cancelled:
        return Round({}, out_of_time=True)
    if outcome.start_error is not None:
        return Round({}, f"could not start: {outcome.start_error}", crashed=True)
    if outcome.exit_code not in (0, 1, 5):  # 5: none of them was collected
        return Round({}, f"pytest exited {outcome.exit_code}", crashed=True)
    try:
        said = results.parse_outcomes(results.read_artifact(report), tree.path)
    except (OSError, results.ResultsError):
        return Round({}, "no JUnit report", crashed=True)
    return Round({i: _outcome(said.get(i)) for i in ids}, "" if said else "not collected")


class _Kept:
    """A re-run's output as the job's log keeps it: its head and its end (pytest's summary),
    at most LOG_HEAD + LOG_TAIL bytes a round, with what was cut said between."""

    def __init__(self) -> None:
        self.head = bytearray()
        self.tail = bytearray()
        self.seen = 0

    def add(self, data: bytes) -> None:
        self.seen += len(data)
        room = LOG_HEAD - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        self.tail += data
        del self.tail[:-LOG_TAIL]

    def text(self) -> bytes:
        cut = self.seen - len(self.head) - len(self.tail)
        if cut <= 0:
            return bytes(self.head + self.tail)
        note = f"\n[ondemand] … {cut} bytes of this re-run's output cut here …\n".encode()
        return bytes(self.head) + note + bytes(self.tail)


def _outcome(word: str | None) -> Outcome:
    return {"passed": Outcome.passed, "failed": Outcome.failed}.get(word or "", Outcome.none)
