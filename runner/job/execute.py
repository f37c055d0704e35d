"""Run one job from start to result: checkout at the pinned SHA, the Python environment, the
workflow's steps, the merge-base benchmark, and the JobResult. Shared by the daemon and
`ondemand run`; everything it touches lives under the job's directory and is removed after.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import NoReturn, TypeVar

from runner.environment import compile_cache, parallel
from runner.environment.compile_cache import CompileCache
from runner.environment.interpreter import Interpreter
from runner.environment.parallel import default_workers
from runner.environment.probe import environment_info
from runner.environment.pyenv import PackageSources, PythonEnvError, python_env
from runner.job import bench_workers, comparison, layouts
from runner.job.sandboxing import Jail, give, scrubbed_env
from runner.job.steps import StepOutcome, run_step
from runner.job.workspace import WorkspaceError, Workspaces
from runner.plugins import PLUGINS
from runner.report import results, stats
from runner.report.progress import ProgressWatch, progress_file
from workflows.models import (
    AccuracyResult,
    BenchmarkResult,
    EnvironmentInfo,
    JobResult,
    JobSpec,
    JobStatus,
    Progress,
    StepResult,
    StepStatus,
)
from workflows.spec import BenchmarkFormat, Step, StepKind, WorkflowSpec

_T = TypeVar("_T")
OP_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,63}$")
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


@dataclass
class JobContext:
    """Where and how a job runs. `on_output` receives the job's log bytes as they come."""

    workspaces: Workspaces
    env_cache: Path
    job_dir: Path
    runner_name: str
    runner_version: str
    on_output: Callable[[bytes], None] = lambda _: None
    cancel: threading.Event = field(default_factory=threading.Event)
    visible_devices: tuple[str, str] | None = None
    jail: Jail | None = None  # None: steps run unconfined, as the runner (`ondemand run`)
    packages: PackageSources = field(default_factory=PackageSources)
    interpreter: Interpreter | None = None  # the job's Python; None: the runner's own
    layout: str | None = None  # None: detect from the checkout
    grace_s: float = 5.0
    keep: bool = False  # keep the job directory (debugging)
    on_step_start: Callable[[int], None] | None = None  # the step's process group id
    on_progress: Callable[[Progress], None] = lambda _: None  # the step, tests done / total
    compile_cache: CompileCache | None = None  # None: each job compiles in its HOME alone
    trusted: bool = False  # a trusted build (runner.daemon.warmup): compiles fill the shared cache
    workers: int = field(default_factory=default_workers)  # `{xdist}` on a cold cache
    warm_workers: int | None = None  # `{xdist}` once kernels load (None: WARM_WORKERS at most)


class _Stop(Exception):
    """Ends the job early with `status` after `step` (not a bug: a verdict)."""

    def __init__(self, status: JobStatus, step: str, message: str) -> None:
        super().__init__(message)
        self.status, self.step, self.message = status, step, message


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


def _now() -> datetime:
    return datetime.now(UTC)


class _Job:
    def __init__(self, spec: JobSpec, workflow: WorkflowSpec, ctx: JobContext) -> None:
        self.spec, self.workflow, self.ctx = spec, workflow, ctx
        self.steps: list[StepResult] = []
        self.accuracy: AccuracyResult | None = None
        self.benchmark: BenchmarkResult | None = None
        self.environment = EnvironmentInfo(
            vendor=workflow.vendor, runner_name=ctx.runner_name, runner_version=ctx.runner_version
        )
        self.unknown_op = False
        self.close_matches: list[str] = []
        self.operators: list[str] = []
        self.notes: list[str] = []
        self.worktrees: list[tuple[Path, Path]] = []
        self.base_fetched = False  # the merge base's commits are in the mirror
        self.seeded: int | None = None  # entries the private compile cache started with
        self._compiles_anew: bool | None = None  # see compiles_anew()

    def log(self, text: str) -> None:
        self.ctx.on_output(f"[ondemand] {text}\n".encode())

    # -- setup -------------------------------------------------------------------------------

    def confined(self, argv: list[str]) -> list[str]:
        return self.ctx.jail.argv(argv) if self.ctx.jail is not None else argv

    @property
    def owner(self) -> tuple[int, int] | None:
        """Who a step's files belong to: the job user, when steps run as one."""
        return self.ctx.jail.owner if self.ctx.jail is not None else None

    def checkout(self, sha: str, name: str) -> Path:
        spec = self.spec
        mirror = self.ctx.workspaces.fetch(
            spec.clone_url, sha, spec.pr_number, token=spec.git_token
        )
        path = self.ctx.workspaces.add_worktree(mirror, sha, self.ctx.job_dir / name)
        self.worktrees.append((mirror, path))
        give(path, self.owner, 0o755)  # the job user's to change; the mirror stays the runner's
        return path

    def environ(self, checkout: Path) -> tuple[Path, dict[str, str]]:
        pyenv = python_env(
            checkout,
            self.ctx.env_cache,
            extras=self.workflow.python_env.extras,
            requirements_files=self.workflow.python_env.requirements_files,
            strict=self.workflow.python_env.strict,
            sources=self.ctx.packages,
            log=self.log,
            host=self.ctx.interpreter,
        )
        self.notes = list(pyenv.notes)
        env = scrubbed_env(
            os.environ,
            home=self.ctx.job_dir / "home",
            workflow_env=self.workflow.env,
            extra={"PYTHONPATH": str(checkout), "VIRTUAL_ENV": str(pyenv.root)},
            visible_devices=self.ctx.visible_devices,
        )
        env["PATH"] = f"{pyenv.root / 'bin'}:{env['PATH']}"
        give(self.ctx.job_dir / "home", self.owner)
        give(self.ctx.job_dir / "artifacts", self.owner)
        if self.ctx.compile_cache is not None:
            env["TRITON_CACHE_DIR"] = str(self.private_cache())
        if pyenv.bytecode is not None:  # the host's packages' bytecode, read-only to jobs
            env["PYTHONPYCACHEPREFIX"] = str(pyenv.bytecode)
        return pyenv.python, env

    def durations(self) -> Path | None:
        """The test times of the repository's last trusted build, where the cache has them."""
        if self.ctx.compile_cache is None:
            return None
        layer = self.ctx.compile_cache.layer(self.spec.clone_url, self.spec.backend)
        path = layer / compile_cache.DURATIONS
        return path if path.is_file() else None

    @property
    def workers(self) -> int:
        """xdist workers: fewer once the kernels load instead of compiling (loading is quick,
        and more processes on one device then cost more than they share); the cold width for
        a commit whose sources differ from the trusted build's (it compiles what it changed)."""
        if not self.seeded or self.compiles_anew():
            return self.ctx.workers
        if self.ctx.warm_workers is not None:
            return self.ctx.warm_workers
        return min(parallel.WARM_WORKERS, self.ctx.workers)

    def compiles_anew(self) -> bool:
        """Whether the job's commit may compile kernels its seeded cache lacks: its sources
        differ from the newest trusted build's commit (tests, docs and benchmarks aside).
        Decided once, and said in the log."""
        if self._compiles_anew is None:
            assert self.ctx.compile_cache is not None  # seeded
            cache = self.ctx.compile_cache
            built = cache.built(cache.layer(self.spec.clone_url, self.spec.backend))
            if self.spec.sha in built:
                self._compiles_anew = False
            elif not built or not self.worktrees:
                self._compiles_anew = True
            else:
                mirror, trusted = self.worktrees[0][0], built[-1]
                changed = self.ctx.workspaces.changed_paths(mirror, trusted, self.spec.sha)
                self._compiles_anew = changed is None or parallel.may_compile_anew(changed)
                if self._compiles_anew:
                    self.log(
                        f"sources differ from trusted build {trusted[:10]}: "
                        "what they change compiles, with the cold width"
                    )
        return self._compiles_anew

    def private_cache(self) -> Path:
        """The job's own Triton cache, seeded once from the shared layer (compile_cache.py)."""
        private = self.ctx.job_dir / "compile" / "triton"
        if self.seeded is None:
            assert self.ctx.compile_cache is not None
            layer = self.ctx.compile_cache.layer(self.spec.clone_url, self.spec.backend)
            give(private.parent, self.owner, 0o700)
            self.seeded = compile_cache.seed(layer, private, self.owner)
            self.log(f"compile cache: {self.seeded} kernels from trusted builds")
        return private

    def setup(self, name: str, func: Callable[[], _T]) -> _T:
        """Run a setup action as a step; a failure errors the job at that step."""
        self.ctx.on_progress(Progress(step=name))
        started = _now()
        try:
            value = func()
        except (WorkspaceError, PythonEnvError) as exc:
            self.steps.append(
                StepResult(
                    name=name,
                    status=StepStatus.errored,
                    duration_s=(_now() - started).total_seconds(),
                    message=str(exc),
                )
            )
            self.log(f"{name} failed: {exc}")
            raise _Stop(JobStatus.errored, name, str(exc)) from exc
        elapsed = (_now() - started).total_seconds()
        self.steps.append(StepResult(name=name, status=StepStatus.succeeded, duration_s=elapsed))
        return value

    # -- steps -------------------------------------------------------------------------------

    def run(
        self,
        step: Step,
        checkout: Path,
        python: Path,
        env: dict[str, str],
        artifacts: Path,
        extra: dict[str, str] | None = None,
    ) -> tuple[StepOutcome, dict[str, str]]:
        argv, values = self.argv_for(step, checkout, python, artifacts, extra)
        self.ctx.on_progress(Progress(step=step.name))
        self.log(f"step {step.name}: {' '.join(argv)} (timeout {step.timeout_s}s)")
        outcome = run_step(
            self.confined(argv),
            cwd=checkout,
            env=env,
            timeout_s=step.timeout_s,
            on_output=self.ctx.on_output,
            cancel=self.ctx.cancel,
            grace_s=self.ctx.grace_s,
            on_start=self.ctx.on_step_start,
        )
        self.log(f"step {step.name}: exit {outcome.exit_code} in {outcome.duration_s:.1f}s")
        return outcome, values

    def argv_for(
        self,
        step: Step,
        checkout: Path,
        python: Path,
        artifacts: Path,
        extra: dict[str, str] | None = None,
    ) -> tuple[list[str], dict[str, str]]:
        """The step's argv in `checkout` (its placeholders' values beside it); `artifacts`
        becomes the job user's."""
        give(artifacts, self.owner)
        values = {
            "op": self.spec.op,
            "artifacts": str(artifacts),
            "python": str(python),
            "workspace": str(checkout),
            "sha": self.spec.sha,
            "backend": self.spec.backend,
            "base": "",
            "budget_s": f"{step.compare.budget_s:g}",
            "target": f"{step.compare.target:g}",
            **(extra or {}),
        }
        lists = {
            "op_tests": layouts.test_files(checkout, self.spec.op),
            "xdist": parallel.xdist_args(self.workers),
        }
        return step.render(values, lists), values

    def result_of(
        self, name: str, outcome: StepOutcome, status: StepStatus, message: str | None
    ) -> StepResult:
        return StepResult(
            name=name,
            status=status,
            exit_code=outcome.exit_code,
            duration_s=round(outcome.duration_s, 3),
            message=message,
            log_tail=None if status is StepStatus.succeeded else outcome.tail,
        )

    def interrupted(self, name: str, outcome: StepOutcome, timeout_s: int) -> None:
        """Record and stop for a step that did not end by itself."""
        if outcome.start_error is not None:
            status, job, message = StepStatus.errored, JobStatus.errored, outcome.start_error
        elif outcome.cancelled:
            status, job, message = StepStatus.cancelled, JobStatus.cancelled, "cancelled"
        elif outcome.timed_out:
            status, job = StepStatus.timed_out, JobStatus.timed_out
            message = f"timed out after {timeout_s}s; its process group was killed"
        else:
            return
        self.steps.append(self.result_of(name, outcome, status, message))
        raise _Stop(job, name, message)

    def accuracy_step(self, step: Step, checkout: Path, python: Path, env: dict[str, str]) -> None:
        artifacts = self.ctx.job_dir / "artifacts"
        plugged = self.with_plugins(env, step)
        with ProgressWatch(progress_file(artifacts), step.name, self.ctx.on_progress):
            outcome, values = self.run(step, checkout, python, plugged, artifacts)
        self.operators = read_operators(artifacts / OPERATORS_FILE)
        self.interrupted(step.name, outcome, step.timeout_s)
        code = outcome.exit_code
        unknown_marker = code == PYTEST_USAGE_ERROR and "Unknown marker" in outcome.tail
        if code == PYTEST_NO_TESTS or unknown_marker:
            self.unknown_op = True
            self.close_matches = self.known_ops(checkout, python, env)
            message = f"no test is marked with {self.spec.op!r}"
            self.steps.append(self.result_of(step.name, outcome, StepStatus.failed, message))
            raise _Stop(JobStatus.failed, step.name, message)
        if code not in (0, 1):
            message = f"pytest exited {code}: not a test verdict (usage, collection or crash)"
            self.steps.append(self.result_of(step.name, outcome, StepStatus.errored, message))
            raise _Stop(JobStatus.errored, step.name, message)
        path = Path(step.results_path(values) or "")
        try:
            self.accuracy = results.read_junit(checkout / path, self.spec.op, checkout)
        except results.ResultsError as exc:
            self.steps.append(self.result_of(step.name, outcome, StepStatus.errored, str(exc)))
            raise _Stop(JobStatus.errored, step.name, str(exc)) from exc
        acc = self.accuracy
        if step.proof is not None:
            acc.proof = results.read_proof(artifacts, step.proof.prefix)
        status = StepStatus.succeeded if code == 0 else StepStatus.failed
        message = None if code == 0 else f"{acc.failed} failed, {acc.errors} errors"
        self.steps.append(self.result_of(step.name, outcome, status, message))

    def with_plugins(self, env: dict[str, str], step: Step) -> dict[str, str]:
        """`env` with the runner's pytest plugins loaded, copied into the job's directory: the
        one that writes the checkout's operators (pytest_operators.py), the one that writes its
        progress (pytest_ondemand_progress.py), and where the step names a proof log, the one
        that counts its lines (pytest_proof.py)."""
        plugins = self.ctx.job_dir / "plugins"
        plugins.mkdir(parents=True, exist_ok=True)
        names = ["pytest_operators", "pytest_ondemand_progress"]
        names += ["pytest_proof"] if step.proof else []
        durations = self.durations()
        if durations is not None:  # a trusted build's test times: slow tests first
            shutil.copyfile(durations, plugins / compile_cache.DURATIONS)
            names.append("pytest_order")
        for name in names:
            shutil.copyfile(PLUGINS / f"{name}.py", plugins / f"{name}.py")
        artifacts = self.ctx.job_dir / "artifacts"
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

    def benchmark_step(
        self,
        step: Step,
        checkout: Path,
        python: Path,
        env: dict[str, str],
        name: str,
        artifacts: Path,
        extra: dict[str, str] | None = None,
    ) -> tuple[StepOutcome, BenchmarkResult | None, str | None]:
        """Run a benchmark; (outcome, result or None, why not)."""
        outcome, values = self.run(step, checkout, python, env, artifacts, extra)
        self.interrupted(name, outcome, step.timeout_s)
        if outcome.exit_code != 0:
            return outcome, None, f"exited {outcome.exit_code}"
        where = step.results_path(values) or ""
        try:
            if step.format is BenchmarkFormat.flaggems:
                paths = sorted(checkout.glob(where))
                if not paths:
                    raise results.ResultsError(f"no benchmark records matching {where}")
                bench = layouts.read_flaggems_records(paths, self.spec.op)
            else:
                bench = results.read_benchmark(checkout / where)
        except results.ResultsError as exc:
            return outcome, None, str(exc)
        return outcome, bench, None

    def known_ops(self, checkout: Path, python: Path, env: dict[str, str]) -> list[str]:
        """Close matches among the operators the checkout's tests know: what the plugin
        wrote during the step, else its registered pytest markers."""
        if self.operators:
            known = [m for m in self.operators if m not in BUILTIN_MARKERS and m != self.spec.op]
            return results.close_matches(self.spec.op, known)
        output = bytearray()
        run_step(
            self.confined([str(python), "-m", "pytest", "--markers"]),
            cwd=checkout,
            env=env,
            timeout_s=120,
            on_output=output.extend,
            cancel=self.ctx.cancel,
        )
        text = output.decode("utf-8", "replace")
        markers = [
            m
            for m in results.markers_from_pytest_output(text)
            if m not in BUILTIN_MARKERS and m != self.spec.op  # registered but with no test
        ]
        return results.close_matches(self.spec.op, markers)

    def check_out(self) -> Path:
        """The pull request's tree, and the merge base's commits when the job will compare:
        the network is then needed by the checkout alone, while a private repository's read
        token is fresh (it lives an hour; the accuracy step may take longer). A failure to
        fetch the base is left to the comparison, which tries again and says why."""
        path = self.checkout(self.spec.sha, "src")
        if self.spec.options.bench and self.spec.options.compare:
            with contextlib.suppress(WorkspaceError):
                self.fetch_base()
        return path

    def fetch_base(self) -> None:
        """The merge base's commit (or its branch) in the mirror, fetched once a job."""
        spec = self.spec
        if self.base_fetched:
            return
        if spec.base_sha:
            self.ctx.workspaces.fetch(spec.clone_url, spec.base_sha, None, token=spec.git_token)
        elif spec.base_ref:
            mirror = self.worktrees[0][0]
            self.ctx.workspaces.fetch_branch(
                mirror, spec.clone_url, spec.base_ref, token=spec.git_token
            )
        self.base_fetched = True

    def base_tree(self, step: Step) -> tuple[str, Path] | None:
        """The merge base's commit and checkout to compare with, or None (no base, or it is
        the pull request's own commit, or it could not be checked out: said as a skipped
        step)."""
        spec = self.spec
        base = spec.base_sha or spec.base_ref
        if not base:
            return None
        started = _now()
        try:
            mirror = self.worktrees[0][0]
            self.fetch_base()
            merge_base = self.ctx.workspaces.merge_base(mirror, spec.sha, base)
            if merge_base is None or merge_base == spec.sha:
                self.log(f"no merge base with {base} to compare with")
                return None
            return merge_base, self.checkout(merge_base, "base")
        except WorkspaceError as exc:
            self.steps.append(
                StepResult(
                    name=f"{step.name} (merge base)",
                    status=StepStatus.skipped,
                    duration_s=(_now() - started).total_seconds(),
                    message=f"could not prepare the merge base: {exc}",
                )
            )
            return None

    def benchmark_compared(
        self, step: Step, checkout: Path, python: Path, env: dict[str, str]
    ) -> BenchmarkResult:
        """The step's benchmark, compared with the merge base where there is one: in one
        process where the workflow's harness can (`compare.argv`), else in rounds of separate
        processes (runner.job.comparison); each row's change is judged from its rounds
        (runner.report.stats). A failed run of the pull request's benchmark stops the job."""
        artifacts = self.ctx.job_dir / "artifacts"
        base = self.base_tree(step) if self.spec.options.compare else None
        if base is not None and step.compare.argv:
            together = self.in_process(step, checkout, python, env, base)
            if together is not None:
                return stats.judged(together).model_copy(update={"merge_base": base[0]})
        elif base is not None and step.compare.workers:
            in_workers = self.in_workers(step, checkout, python, env, base)
            if in_workers is not None:
                return stats.judged(in_workers).model_copy(update={"merge_base": base[0]})
        outcome, bench, why = self.benchmark_step(step, checkout, python, env, step.name, artifacts)
        if bench is None:
            self.benchmark_failed(step.name, outcome, why)
        self.steps.append(self.result_of(step.name, outcome, StepStatus.succeeded, None))
        if base is None:
            return bench
        rounds = self.in_rounds(step, checkout, python, env, base, bench)
        return stats.judged(rounds).model_copy(update={"merge_base": base[0]})

    def benchmark_failed(self, name: str, outcome: StepOutcome, why: str | None) -> NoReturn:
        """Stop the job at a benchmark of the pull request that gave no result: failed where
        the harness said a kernel was wrong (exit 1), errored otherwise."""
        verdict = StepStatus.failed if outcome.exit_code == 1 else StepStatus.errored
        message = f"benchmark {why}"
        self.steps.append(self.result_of(name, outcome, verdict, message))
        job = JobStatus.failed if verdict is StepStatus.failed else JobStatus.errored
        raise _Stop(job, name, message)

    def in_process(
        self,
        step: Step,
        checkout: Path,
        python: Path,
        env: dict[str, str],
        base: tuple[str, Path],
    ) -> BenchmarkResult | None:
        """The pull request's harness timing both trees in one process; None where it cannot
        (exit 2 or 3: said in the log, and the rounds go to separate processes)."""
        merge_base, tree = base
        together = step.model_copy(update={"argv": step.compare.argv})
        outcome, bench, why = self.benchmark_step(
            together,
            checkout,
            python,
            env,
            step.name,
            self.ctx.job_dir / "artifacts",
            {"base": str(tree)},
        )
        if outcome.exit_code in (2, 3):
            self.log(f"the harness cannot time both trees in one process (exit "
                     f"{outcome.exit_code}): separate processes instead")  # fmt: skip
            return None
        if bench is None:
            self.benchmark_failed(step.name, outcome, why)
        rounds = comparison.rounds_of(bench.rows)
        message = f"with merge base {merge_base[:10]} in one process: {rounds} rounds"
        if not rounds:
            message = f"merge base {merge_base[:10]}: no row of it to compare"
        self.steps.append(self.result_of(step.name, outcome, StepStatus.succeeded, message))
        return bench

    def in_workers(
        self,
        step: Step,
        checkout: Path,
        python: Path,
        env: dict[str, str],
        base: tuple[str, Path],
    ) -> BenchmarkResult | None:
        """Both trees' benchmarks in a worker each (runner.job.bench_workers), started at once
        so their imports and collection overlap, then rounds taken in turn in them
        (`comparison.process_rounds`); None where the merge base's environment cannot be made
        (the plain run then goes alone, as without a base). A pull request whose own worker
        gives no first round stops the job as a failed benchmark does."""
        merge_base, tree = base
        name = f"{step.name} (merge base)"
        try:
            base_python, base_env = self.environ(tree)
        except PythonEnvError as exc:
            message = f"could not prepare the merge base: {exc}"
            self.steps.append(StepResult(name=name, status=StepStatus.skipped, message=message))
            return None
        artifacts = self.ctx.job_dir / "artifacts"
        plugins = self.ctx.job_dir / "plugins"
        plugins.mkdir(parents=True, exist_ok=True)
        plugin = f"{bench_workers.PLUGIN}.py"
        shutil.copyfile(PLUGINS / plugin, plugins / plugin)
        workers: list[bench_workers.Worker] = []
        started = _now()
        self.ctx.on_progress(Progress(step=step.name))
        for side, tree_, python_, env_ in (
            ("after", checkout, python, env),
            ("base", tree, base_python, base_env),
        ):
            _clear_records(step, tree_)
            requests, answers = bench_workers.prepare(self.ctx.job_dir, artifacts, side)
            give(answers, self.owner)
            worker = bench_workers.Worker(
                name=side, tree=tree_, records=step.results or "", op=self.spec.op,
                requests=requests, answers=answers, log=self.log,
                first_timeout_s=float(step.timeout_s),
            )  # fmt: skip
            argv, _ = self.argv_for(step, tree_, python_, artifacts)
            self.log(f"step {step.name} ({side} worker): {' '.join(argv)}")
            plugged = bench_workers.worker_env(env_, plugins, requests, answers, step.timeout_s)
            worker.start(self.confined(argv), plugged, self.ctx.on_output, self.ctx.on_step_start)
            workers.append(worker)
        after, before = workers
        try:
            first = after.round(self.ctx.cancel)
            if first is None:
                after.stop(self.ctx.grace_s)
                before.stop(self.ctx.grace_s)
                if self.ctx.cancel.is_set():
                    raise _Stop(JobStatus.cancelled, step.name, "cancelled")
                outcome = after.outcome or StepOutcome(None, 0.0)
                self.benchmark_failed(step.name, outcome, f"worker: {after.failure}")
            self.steps.append(
                StepResult(
                    name=step.name, status=StepStatus.succeeded,
                    duration_s=round((_now() - started).total_seconds(), 3),
                    message="in a worker per tree",
                )
            )  # fmt: skip
            runs = comparison.process_rounds(
                first,
                lambda: after.round(self.ctx.cancel),
                lambda: before.round(self.ctx.cancel),
                budget_s=step.compare.budget_s,
                target=step.compare.target,
                max_rounds=step.compare.max_rounds,
            )
        finally:
            for worker in workers:
                worker.stop(self.ctx.grace_s)
        if self.ctx.cancel.is_set():
            raise _Stop(JobStatus.cancelled, name, "cancelled")
        elapsed = (_now() - started).total_seconds()
        pids = {w.name: sorted(w.pids) for w in workers}
        self.log(f"{name}: worker processes {pids}")
        failures = [f"{w.name} worker: {w.failure}" for w in workers if w.failure]
        if not runs.rounds:
            message = f"no benchmark of {self.spec.op} on the merge base {merge_base[:10]}"
            message += "".join(f"; {f}" for f in failures)
            self.steps.append(StepResult(name=name, status=StepStatus.skipped, message=message))
            return first
        message = comparison.describe(runs, elapsed, merge_base, "a worker per tree")
        message += "".join(f"; {f}" for f in failures)
        self.log(f"{name}: {message}")
        self.steps.append(
            StepResult(
                name=name, status=StepStatus.succeeded, duration_s=round(elapsed, 3),
                message=message,
            )
        )  # fmt: skip
        return comparison.merged(runs, mode="workers")

    def in_rounds(
        self,
        step: Step,
        checkout: Path,
        python: Path,
        env: dict[str, str],
        base: tuple[str, Path],
        first: BenchmarkResult,
    ) -> BenchmarkResult:
        """The pull request's first run, then runs of each tree in turn
        (`comparison.process_rounds`), merged into per-round samples."""
        merge_base, tree = base
        name = f"{step.name} (merge base)"
        started = _now()
        try:
            base_python, base_env = self.environ(tree)
        except PythonEnvError as exc:
            message = f"could not prepare the merge base: {exc}"
            self.steps.append(StepResult(name=name, status=StepStatus.skipped, message=message))
            return first
        artifacts = self.ctx.job_dir / "artifacts"
        last: list[StepOutcome] = []

        def measure(
            tree_: Path, python_: Path, env_: dict[str, str], where: str
        ) -> comparison.Measure:
            def run() -> BenchmarkResult | None:
                _clear_records(step, tree_)
                outcome, bench, why = self.benchmark_step(
                    step, tree_, python_, env_, name, artifacts / where
                )
                last.append(outcome)
                if bench is None:
                    self.log(f"{name}: a run in {where} gave no rows ({why})")
                return bench

            return run

        runs = comparison.process_rounds(
            first,
            measure(checkout, python, env, "after"),
            measure(tree, base_python, base_env, "base"),
            budget_s=step.compare.budget_s,
            target=step.compare.target,
            max_rounds=step.compare.max_rounds,
        )
        elapsed = (_now() - started).total_seconds()
        if not runs.rounds:
            message = f"no benchmark of {self.spec.op} on the merge base {merge_base[:10]}"
            outcome = last[-1] if last else None
            self.steps.append(
                self.result_of(name, outcome, StepStatus.skipped, message)
                if outcome is not None
                else StepResult(name=name, status=StepStatus.skipped, message=message)
            )
            return first
        message = comparison.describe(runs, elapsed, merge_base)
        self.log(f"{name}: {message}")
        self.steps.append(
            StepResult(
                name=name, status=StepStatus.succeeded, duration_s=round(elapsed, 3),
                message=message,
            )
        )  # fmt: skip
        return comparison.merged(runs)

    # -- the job -----------------------------------------------------------------------------

    def body(self) -> None:
        spec = self.spec
        if not OP_NAME.match(spec.op):
            raise _Stop(JobStatus.errored, "setup", f"not an operator name: {spec.op!r}")
        checkout = self.setup("checkout", self.check_out)
        layout = self.ctx.layout or layouts.detect(checkout)
        if layout:
            self.log(f"repository layout: {layout}")
        python, env = self.setup("environment", lambda: self.environ(checkout))
        self.environment = environment_info(
            python,
            env,
            vendor=self.workflow.vendor,
            runner_name=self.ctx.runner_name,
            runner_version=self.ctx.runner_version,
            cwd=self.ctx.job_dir,  # never the checkout: nothing of the pull request runs here
        ).model_copy(update={"notes": self.notes})
        for step in self.workflow.steps_for(layout):
            if self.ctx.cancel.is_set():
                raise _Stop(JobStatus.cancelled, step.name, "cancelled")
            if step.kind is StepKind.accuracy:
                self.accuracy_step(step, checkout, python, env)
            elif step.kind is StepKind.benchmark:
                if not spec.options.bench:
                    self.steps.append(
                        StepResult(name=step.name, status=StepStatus.skipped, message="--no-bench")
                    )
                    continue
                self.benchmark = self.benchmark_compared(step, checkout, python, env)
            else:
                outcome, _ = self.run(step, checkout, python, env, self.ctx.job_dir / "artifacts")
                self.interrupted(step.name, outcome, step.timeout_s)
                ok = outcome.exit_code == 0
                status = StepStatus.succeeded if ok else StepStatus.failed
                message = None if ok else f"exited {outcome.exit_code}"
                self.steps.append(self.result_of(step.name, outcome, status, message))

    def verdict(self) -> JobStatus:
        if any(s.status is StepStatus.failed for s in self.steps):
            return JobStatus.failed
        return JobStatus.succeeded


def _clear_records(step: Step, tree: Path) -> None:
    """Remove a foreign harness's records of an earlier run in `tree` (they are globbed)."""
    if step.format is BenchmarkFormat.flaggems and step.results:
        for stale in tree.glob(step.results):
            stale.unlink(missing_ok=True)


def execute(spec: JobSpec, workflow: WorkflowSpec, ctx: JobContext) -> JobResult:
    """Run the job and return its result; never raises for anything the job itself did."""
    started = _now()
    job = _Job(spec, workflow, ctx)
    ctx.job_dir.mkdir(parents=True, exist_ok=True)
    error_step = error_message = None
    job.log(f"job {spec.id}: {spec.op} on {spec.backend} at {spec.sha} (attempt {spec.attempt})")
    try:
        job.body()
        status = job.verdict()
    except _Stop as stop:
        status = stop.status
        if status is not JobStatus.failed:
            error_step, error_message = stop.step, stop.message
        job.log(f"stopped at {stop.step}: {stop.message}")
    except Exception as exc:  # a bug here must still produce a result the service can show
        status, error_step = JobStatus.errored, "runner"
        error_message = f"{type(exc).__name__}: {exc}"
        job.log(f"runner error: {error_message}")
    finally:
        if not ctx.keep:
            for mirror, path in reversed(job.worktrees):
                with contextlib.suppress(WorkspaceError):
                    ctx.workspaces.remove_worktree(mirror, path)
    result = JobResult(
        status=status,
        sha=spec.sha,
        environment=job.environment,
        steps=job.steps,
        accuracy=job.accuracy,
        benchmark=job.benchmark,
        error_step=error_step,
        error_message=error_message,
        unknown_op=job.unknown_op,
        close_matches=job.close_matches,
        operators=job.operators,
        started_at=started,
        finished_at=_now(),
    )
    job.log(f"job {spec.id}: {status.value}")
    if ctx.trusted and ctx.compile_cache is not None and job.seeded is not None:
        layer = ctx.compile_cache.layer(spec.clone_url, spec.backend)
        ran = status in (JobStatus.succeeded, JobStatus.failed)
        private = ctx.job_dir / "compile" / "triton"
        added = compile_cache.publish(private, layer, spec.sha if ran else None)
        job.log(f"compile cache: {added} kernels published from trusted build {spec.sha[:10]}")
        if ran:
            compile_cache.record_durations(ctx.job_dir / "artifacts" / "junit.xml", layer)
    if not ctx.keep:
        shutil.rmtree(ctx.job_dir / "home", ignore_errors=True)
        shutil.rmtree(ctx.job_dir / "compile", ignore_errors=True)
    return result
