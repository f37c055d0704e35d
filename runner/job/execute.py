"""Run one job from start to result: checkout at the pinned SHA, the Python environment, the
workflow's steps (each run by its kind, `runner.job.kinds`, with the job as its
`StepContext`), and the JobResult. Shared by the daemon and `ondemand run`; everything it
touches lives under the job's directory and is removed after.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from ondemand.git import check_sha
from runner.environment import parallel
from runner.environment.compile_cache import CompileCache
from runner.environment.interpreter import Interpreter
from runner.environment.parallel import default_workers
from runner.environment.probe import environment_info
from runner.environment.pyenv import PackageSources, PythonEnvError, python_env
from runner.job import layouts
from runner.job.compiles import JobCompiles
from runner.job.kinds import HEAD_STARTS, KINDS
from runner.job.kinds.context import (
    OP_NAME,
    HeadStart,
    MergeBase,
    Stop,
    Tree,
    base_step,
    now,
)
from runner.job.sandboxing import Jail, give, scrubbed_env
from runner.job.steps import OutputSink, StepOutcome, run_step
from runner.job.workspace import WorkspaceError, Workspaces, git
from workflows.models import (
    AccuracyResult,
    BenchmarkResult,
    EnvironmentInfo,
    FailureClasses,
    JobResult,
    JobSpec,
    JobStatus,
    ProfileResult,
    Progress,
    SlotInfo,
    StepResult,
    StepStatus,
)
from workflows.repo_config import (
    CONFIG_PATH,
    DEFAULTS,
    FailuresSection,
    RepoConfig,
    parse_repo_config,
)
from workflows.spec import Step, WorkflowSpec

_T = TypeVar("_T")


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
    slot: SlotInfo | None = None  # the runner's slot it runs on (None: `ondemand run`)


class _Job:
    """One job's run: its setup steps, then each workflow step through its kind (`KINDS`),
    to which it is the `StepContext`."""

    def __init__(self, spec: JobSpec, workflow: WorkflowSpec, ctx: JobContext) -> None:
        self.spec, self.workflow, self.ctx = spec, workflow, ctx
        self.started = now()
        self.steps: list[StepResult] = []
        self.accuracy: AccuracyResult | None = None
        self.benchmark: BenchmarkResult | None = None
        self.environment = EnvironmentInfo(
            vendor=workflow.vendor,
            runner_name=ctx.runner_name,
            runner_version=ctx.runner_version,
            slot=ctx.slot,
        )
        self.unknown_op = False
        self.close_matches: list[str] = []
        self.operators: list[str] = []
        self.failures: FailureClasses | None = None
        self.profile: ProfileResult | None = None
        self._settings: RepoConfig | None = None
        self.notes: list[str] = []
        self.worktrees: list[tuple[Path, Path]] = []
        self.base_fetched = False  # the merge base's commits are in the mirror
        self.head_starts: dict[str, HeadStart] = {}  # by step name, until the step takes it
        self._base: tuple[MergeBase | None] | None = None  # see base_tree()
        self.compiles = JobCompiles(
            spec, ctx.compile_cache, ctx.job_dir, ctx.workspaces, self.log,
            cold=ctx.workers, warm=ctx.warm_workers,
        )  # fmt: skip

    def log(self, text: str) -> None:
        self.ctx.on_output(f"[ondemand] {text}\n".encode())

    def record(self, result: StepResult) -> None:
        self.steps.append(result)

    # -- what steps are given (StepContext) --------------------------------------------------

    @property
    def job_dir(self) -> Path:
        return self.ctx.job_dir

    @property
    def artifacts(self) -> Path:
        return self.ctx.job_dir / "artifacts"

    @property
    def plugins(self) -> Path:
        return self.ctx.job_dir / "plugins"

    @property
    def elapsed_s(self) -> float:
        return (now() - self.started).total_seconds()

    @property
    def cancel(self) -> threading.Event:
        return self.ctx.cancel

    @property
    def grace_s(self) -> float:
        return self.ctx.grace_s

    @property
    def on_output(self) -> OutputSink:
        return self.ctx.on_output

    @property
    def on_step_start(self) -> Callable[[int], None] | None:
        return self.ctx.on_step_start

    @property
    def on_progress(self) -> Callable[[Progress], None]:
        return self.ctx.on_progress

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
            device=self.workflow.device,
        )
        self.notes = list(pyenv.notes)
        env = scrubbed_env(
            os.environ,
            home=self.ctx.job_dir / "home",
            workflow_env=self.workflow.env,
            extra={"PYTHONPATH": str(checkout), "VIRTUAL_ENV": str(pyenv.root)},
            visible_devices=self.ctx.visible_devices,
            inherited=self.workflow.device.inherit,
        )
        env["PATH"] = f"{pyenv.root / 'bin'}:{env['PATH']}"
        give(self.ctx.job_dir / "home", self.owner)
        give(self.ctx.job_dir / "artifacts", self.owner)
        if self.ctx.compile_cache is not None:
            env["TRITON_CACHE_DIR"] = str(self.compiles.private_cache(self.owner))
        if pyenv.bytecode is not None:  # the host's packages' bytecode, read-only to jobs
            env["PYTHONPYCACHEPREFIX"] = str(pyenv.bytecode)
        return pyenv.python, env

    def prepare(self, checkout: Path) -> Tree:
        python, env = self.environ(checkout)
        return Tree(checkout, python, env)

    def settings(self) -> RepoConfig:
        """The repository's settings file at the job's base commit, read from the mirror once
        (as the service reads it: a pull request cannot loosen its own gate); the defaults
        without a base, a file, or with a problem in it."""
        if self._settings is None:
            self._settings = DEFAULTS
            if self.ctx.trusted:  # a warm-up's verdict is nobody's: nothing is re-run
                self._settings = RepoConfig(failures=FailuresSection(reruns=0))
                return self._settings
            base = self.spec.base_sha
            if base and self.worktrees:
                try:
                    self.fetch_base()
                    check_sha(base)
                    text = git(["show", f"{base}:{CONFIG_PATH}"], cwd=self.worktrees[0][0])
                    self._settings = parse_repo_config(text).config
                except WorkspaceError:
                    pass
        return self._settings

    def durations(self) -> Path | None:
        """The test times of the repository's last trusted build, where the cache has them."""
        return self.compiles.durations()

    @property
    def workers(self) -> int:
        """xdist workers for the job's tests, by what its compile cache holds (`compiles`)."""
        return self.compiles.workers(self.worktrees[0][0] if self.worktrees else None)

    def setup(self, name: str, func: Callable[[], _T]) -> _T:
        """Run a setup action as a step; a failure errors the job at that step."""
        self.ctx.on_progress(Progress(step=name))
        started = now()
        try:
            value = func()
        except (WorkspaceError, PythonEnvError) as exc:
            self.steps.append(
                StepResult(
                    name=name,
                    status=StepStatus.errored,
                    duration_s=(now() - started).total_seconds(),
                    message=str(exc),
                )
            )
            self.log(f"{name} failed: {exc}")
            raise Stop(JobStatus.errored, name, str(exc)) from exc
        elapsed = (now() - started).total_seconds()
        self.steps.append(StepResult(name=name, status=StepStatus.succeeded, duration_s=elapsed))
        return value

    # -- running a step ----------------------------------------------------------------------

    def run(
        self, step: Step, tree: Tree, artifacts: Path, extra: dict[str, str] | None = None
    ) -> tuple[StepOutcome, dict[str, str]]:
        argv, values = self.argv_for(step, tree, artifacts, extra)
        self.ctx.on_progress(Progress(step=step.name))
        self.log(f"step {step.name}: {' '.join(argv)} (timeout {step.timeout_s}s)")
        outcome = run_step(
            self.confined(argv),
            cwd=tree.path,
            env=tree.env,
            timeout_s=step.timeout_s,
            on_output=self.ctx.on_output,
            cancel=self.ctx.cancel,
            grace_s=self.ctx.grace_s,
            on_start=self.ctx.on_step_start,
        )
        self.log(f"step {step.name}: exit {outcome.exit_code} in {outcome.duration_s:.1f}s")
        return outcome, values

    def argv_for(
        self, step: Step, tree: Tree, artifacts: Path, extra: dict[str, str] | None = None
    ) -> tuple[list[str], dict[str, str]]:
        """The step's argv in `tree` (its placeholders' values beside it); `artifacts`
        becomes the job user's."""
        give(artifacts, self.owner)
        values = {
            "op": self.spec.op,
            "artifacts": str(artifacts),
            "python": str(tree.python),
            "workspace": str(tree.path),
            "sha": self.spec.sha,
            "backend": self.spec.backend,
            "base": "",
            "budget_s": f"{step.compare.budget_s:g}",
            "target": f"{step.compare.target:g}",
            **(extra or {}),
        }
        lists = {
            "op_tests": layouts.test_files(tree.path, self.spec.op),
            "xdist": parallel.xdist_args(self.workers),
        }
        return step.render(values, lists), values

    # -- the merge base ----------------------------------------------------------------------

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

    def base_tree(self, step: Step) -> MergeBase | None:
        """The merge base's commit and checkout to compare with, or None (no base, or it is
        the pull request's own commit, or it could not be checked out: said as a skipped
        step). Decided once a job: a step started ahead asks before its step does."""
        if self._base is None:
            self._base = (self._find_base(step),)
        return self._base[0]

    def _find_base(self, step: Step) -> MergeBase | None:
        spec = self.spec
        base = spec.base_sha or spec.base_ref
        if not base:
            return None
        started = now()
        try:
            mirror = self.worktrees[0][0]
            self.fetch_base()
            if spec.options.exact_base and spec.base_sha:
                merge_base: str | None = spec.base_sha  # `vs REF`: that commit itself
            else:
                merge_base = self.ctx.workspaces.merge_base(mirror, spec.sha, base)
            if merge_base is None or merge_base == spec.sha:
                self.log(f"no merge base with {base} to compare with")
                return None
            return MergeBase(merge_base, self.checkout(merge_base, "base"))
        except WorkspaceError as exc:
            self.steps.append(
                StepResult(
                    name=base_step(step),
                    status=StepStatus.skipped,
                    duration_s=(now() - started).total_seconds(),
                    message=f"could not prepare the merge base: {exc}",
                )
            )
            return None

    # -- the job -----------------------------------------------------------------------------

    def body(self) -> None:
        spec = self.spec
        if not OP_NAME.match(spec.op):
            raise Stop(JobStatus.errored, "setup", f"not an operator name: {spec.op!r}")
        checkout = self.setup("checkout", self.check_out)
        layout = self.ctx.layout or layouts.detect(checkout)
        if layout:
            self.log(f"repository layout: {layout}")
        tree = self.setup("environment", lambda: self.prepare(checkout))
        self.environment = environment_info(
            tree.python,
            tree.env,
            self.workflow,
            runner_name=self.ctx.runner_name,
            runner_version=self.ctx.runner_version,
            cwd=self.ctx.job_dir,  # never the checkout: nothing of the pull request runs here
        ).model_copy(update={"notes": self.notes, "slot": self.ctx.slot})
        steps = self.workflow.steps_for(layout)
        try:
            for index, step in enumerate(steps):
                if self.ctx.cancel.is_set():
                    raise Stop(JobStatus.cancelled, step.name, "cancelled")
                if index == 0:
                    self.start_ahead(steps, tree)
                KINDS[step.kind](step, self, tree)
        finally:
            for name, started in self.head_starts.items():
                self.log(f"step {name}: what it started ahead is stopped unused")
                started.stop(self.ctx.grace_s)

    def start_ahead(self, steps: list[Step], tree: Tree) -> None:
        """Before the first step, start what later steps' kinds start ahead (`HEAD_STARTS`:
        the benchmark's workers, whose imports and collection then pass while the accuracy
        tests run), each given the timeouts of the steps before it."""
        for index, step in enumerate(steps[1:], start=1):
            starter = HEAD_STARTS.get(step.kind)
            if starter is None:
                continue
            wait_s = float(sum(s.timeout_s for s in steps[:index]))
            started = starter(step, self, tree, wait_s)
            if started is not None:
                self.head_starts[step.name] = started

    def take_head_start(self, step: Step) -> HeadStart | None:
        return self.head_starts.pop(step.name, None)

    def verdict(self) -> JobStatus:
        if any(s.status is StepStatus.failed for s in self.steps):
            return JobStatus.failed
        return JobStatus.succeeded


def execute(spec: JobSpec, workflow: WorkflowSpec, ctx: JobContext) -> JobResult:
    """Run the job and return its result; never raises for anything the job itself did."""
    job = _Job(spec, workflow, ctx)
    started = job.started
    ctx.job_dir.mkdir(parents=True, exist_ok=True)
    error_step = error_message = None
    job.log(f"job {spec.id}: {spec.op} on {spec.backend} at {spec.sha} (attempt {spec.attempt})")
    try:
        job.body()
        status = job.verdict()
    except Stop as stop:
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
        failures=job.failures,
        profile=job.profile,
        started_at=started,
        finished_at=now(),
    )
    job.log(f"job {spec.id}: {status.value}")
    if ctx.trusted:
        job.compiles.publish(status)
    if not ctx.keep:
        shutil.rmtree(ctx.job_dir / "home", ignore_errors=True)
        shutil.rmtree(ctx.job_dir / "compile", ignore_errors=True)
    return result
