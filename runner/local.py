"""`ondemand run OP:BACKEND`: one workflow run right here, on a repository's commit, with no
service; prints the report as the bot would post it. Exit status 0 passed (or failed of
nothing the repository's `failures.gate` names: flaky, already failing on the base), 1 failed
(or the repository's regression gate failed), 2 errored.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from report import gate as report_gate
from report.comment import render_comment
from report.markdown import plural
from report.views import JobView
from runner.daemon.pool import runner_version
from runner.daemon.warmup import warm
from runner.environment import interpreter
from runner.environment.compile_cache import CompileCache
from runner.environment.interpreter import Interpreter, InterpreterError
from runner.environment.parallel import default_workers
from runner.environment.pyenv import PackageSources
from runner.job.execute import OP_NAME, JobContext, execute
from runner.job.kinds.benchmark.profiling import trace_files
from runner.job.logstream import LogStream
from runner.job.sandboxing import Jail, JailError, jail_for_host
from runner.job.selection import select_changed
from runner.job.workspace import WorkspaceError, Workspaces, git
from workflows.changes import Selection
from workflows.models import JobOptions, JobResult, JobSpec, JobStatus
from workflows.repo_config import (
    CONFIG_PATH,
    DEFAULTS,
    ComparePolicy,
    RepoConfig,
    parse_repo_config,
)
from workflows.spec import WorkflowError, WorkflowSpec, backend_names, load_workflows

EXIT = {JobStatus.succeeded: 0, JobStatus.failed: 1}
CHANGED = "changed"  # `changed:BACKEND`: the operators the commit changes


class UsageError(ValueError):
    pass


def parse_target(text: str, names: Mapping[str, str]) -> tuple[str, str]:
    """`OP:BACKEND` (the backend by name or alias) → (op, backend name)."""
    op, sep, backend = text.partition(":")
    op, backend = op.strip(), backend.strip().lower()
    if not sep or not op or not backend:
        raise UsageError(f"expected OP:BACKEND, got {text!r}")
    if not OP_NAME.match(op):
        raise UsageError(f"not an operator name: {op!r} (lowercase letters, digits and '_')")
    return op, parse_backend(backend, names)


def parse_backend(text: str, names: Mapping[str, str]) -> str:
    """A backend by name or alias → its name."""
    backend = text.strip().lower()
    if backend not in names:
        raise UsageError(f"unknown backend {backend!r}; known: {', '.join(sorted(names))}")
    return names[backend]


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ondemand"


def repo_settings(repo: Path, ref: str | None) -> RepoConfig:
    """The repository's settings file at `ref` (the base, as the service reads it), the
    defaults without one; its problems are said on stderr (the defaults then apply)."""
    if ref is None:
        return DEFAULTS
    try:
        text = git(["show", f"{ref}:{CONFIG_PATH}"], cwd=repo)
    except WorkspaceError:
        return DEFAULTS
    reading = parse_repo_config(text)
    for problem in reading.problems:
        print(f"ondemand run: {CONFIG_PATH} at {ref}: {problem}", file=sys.stderr)
    if reading.problems:
        print("ondemand run: the defaults apply to all of it", file=sys.stderr)
    return reading.config


def gate_failed(spec: JobSpec, result: JobResult, policy: ComparePolicy) -> bool:
    """Whether the repository's gate fails this result (a significant regression)."""
    return report_gate.gate_failed(job_view(spec, result, Path("."), policy))


def failures_pass_gate(spec: JobSpec, result: JobResult, policy: ComparePolicy) -> bool:
    """Whether a failed result's failures are all of classes the repository's
    `failures.gate` leaves out (flaky, already failing on the base, by default)."""
    view = job_view(spec, result, Path("."), policy)
    return result.status is JobStatus.failed and not report_gate.failures_fail_gate(view)


def render(spec: JobSpec, result: JobResult, log_path: Path, policy: ComparePolicy) -> str:
    """The report as the bot posts it (`report.comment`)."""
    return render_comment(job_view(spec, result, log_path, policy))


def job_view(spec: JobSpec, result: JobResult, log_path: Path, policy: ComparePolicy) -> JobView:
    """This run as the report takes it."""
    return JobView(
        id=spec.id,
        repo=spec.repo,
        pr_number=spec.pr_number,
        op=spec.op,
        backend=spec.backend,
        sha=spec.sha,
        status=result.status,
        bench=spec.options.bench,
        # Locally, comparing is opt-in (--base): without it there is nothing to say.
        compare=True,
        created_at=result.started_at or datetime.now(UTC),
        started_at=result.started_at,
        finished_at=result.finished_at,
        runner_name=result.environment.runner_name,
        queue_position=None,
        runners_online=1,
        job_url=log_path.resolve().parent.as_uri(),
        log_url=log_path.resolve().as_uri(),
        result=result,
        reason=None,
        threshold=policy.threshold,
        gate=policy.gate,
        base_ref=spec.base_ref,
    )


def resolve(repo: Path, ref: str) -> str:
    try:
        return git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd=repo).strip()
    except WorkspaceError as exc:
        raise UsageError(f"{ref!r} is not a commit in {repo}") from exc


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ondemand run",
        description="Run one OP:BACKEND workflow here on a commit and print the report.",
    )
    parser.add_argument(
        "target",
        help="OP:BACKEND, e.g. adaptive_max_pool3d_backward:cpu; changed:BACKEND runs every "
        "operator the commit changes against --base",
    )
    parser.add_argument(
        "--limit",
        type=int,
        default=None,
        help=f"changed: run nothing above this many (default: the base's {CONFIG_PATH}, or 20)",
    )
    parser.add_argument("--all", action="store_true", help="changed: run them however many")
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="git repository (default .)")
    parser.add_argument("--ref", default="HEAD", help="commit to test (default HEAD)")
    parser.add_argument(
        "--base",
        help="compare the benchmark with the merge base of this ref, judged by the "
        f"repository's {CONFIG_PATH} there",
    )
    parser.add_argument("--no-bench", action="store_true", help="skip the benchmark step")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="with --base: after the comparison, profile the rows that changed most on both "
        "sides (the workflow's device.profiler) and keep their Chrome traces (/test profile)",
    )
    parser.add_argument("--json", type=Path, help="also write the JobResult as JSON here")
    parser.add_argument("--workflows", type=Path, help="directory of workflow YAML files")
    parser.add_argument("--cache", type=Path, default=None, help="mirrors and Python envs")
    parser.add_argument("--quiet", "-q", action="store_true", help="do not echo the job log")
    interpreter.add_argument(parser)
    PackageSources.add_arguments(parser)
    parser.add_argument(
        "--job-user",
        help="as root: run the steps as this unprivileged user, in their own namespaces, as a "
        "runner does (default: as yourself)",
    )
    parser.add_argument(
        "--no-network-isolation", action="store_true", help="let the steps use the network"
    )
    parser.add_argument(
        "--workers", type=int, default=None, help="pytest-xdist workers (default: cores, at most 8)"
    )
    parser.add_argument(
        "--warm-workers",
        type=int,
        default=None,
        help="pytest-xdist workers once kernels load from the compile cache (default: 1)",
    )
    parser.add_argument(
        "--no-compile-cache",
        action="store_true",
        help="compile every kernel afresh: no shared compile cache is read, none is built",
    )
    return parser


def run_main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        workflows: dict[str, WorkflowSpec] = (
            load_workflows(args.workflows) if args.workflows else load_workflows()
        )
        name, _, rest = args.target.partition(":")
        changed = name.strip() == CHANGED
        if changed:
            op, backend = CHANGED, parse_backend(rest, backend_names(workflows))
        else:
            op, backend = parse_target(args.target, backend_names(workflows))
        repo = args.repo.resolve()
        sha = resolve(repo, args.ref)
        base_sha = resolve(repo, args.base) if args.base else None
        if changed and base_sha is None:
            raise UsageError("changed:BACKEND needs --base, the branch the change goes into")
    except (UsageError, WorkflowError) as exc:
        print(f"ondemand run: {exc}", file=sys.stderr)
        return 2
    config = repo_settings(repo, args.base)  # read once: its problems are said once
    if not changed:
        return _run_op(args, workflows, config, op, backend, repo, sha, base_sha)
    changes = config.changes
    limit = args.limit or changes.limit
    try:
        chosen = select_changed(
            repo, args.base, args.ref, workflows[backend], changes.selection_rules()
        )
    except WorkspaceError as exc:
        print(f"ondemand run: {exc}", file=sys.stderr)
        return 2
    print(render_selection(chosen, limit), file=sys.stderr, flush=True)
    if not chosen.operators or (len(chosen.operators) > limit and not args.all):
        return 0 if not chosen.operators else 2
    return max(
        _run_op(args, workflows, config, name, backend, repo, sha, base_sha)
        for name in chosen.operators
    )


def render_selection(chosen: Selection, limit: int) -> str:
    """What `changed` chose and why, file by file; above `limit` operators, how to run them."""
    if not chosen.operators:
        return "changed: no operator changed" + (
            f" ({len(chosen.unmatched)} files touch none)" if chosen.unmatched else ""
        )
    lines = [f"changed: {plural(len(chosen.operators), 'operator')}"]
    for name, reasons in chosen.operators.items():
        lines.append(
            f"  {name}: {'; '.join(reasons[:3])}"
            + (f" (and {len(reasons) - 3} more)" if len(reasons) > 3 else "")
        )
    if len(chosen.operators) > limit:
        lines.append(f"more than {limit}: nothing run; --all runs them all")
    return "\n".join(lines)


def _run_op(
    args: argparse.Namespace,
    workflows: Mapping[str, WorkflowSpec],
    config: RepoConfig,
    op: str,
    backend: str,
    repo: Path,
    sha: str,
    base_sha: str | None,
) -> int:
    """One operator's workflow here, judged by the repository's `config`; its exit status."""
    spec = JobSpec(
        id=0,
        repo=repo.name,
        clone_url=str(repo),
        pr_number=0,
        sha=sha,
        base_ref=args.base if base_sha is not None else None,
        base_sha=base_sha,
        op=op,
        backend=backend,
        options=JobOptions(
            bench=not args.no_bench, compare=base_sha is not None, profile=args.profile
        ),
    )
    cache = args.cache or default_cache()
    # The steps' environment is scrubbed; the device choice made here is kept.
    var = workflows[backend].visible_devices_var
    visible = (var, os.environ[var]) if var and var in os.environ else None
    workflow = workflows[backend]
    try:
        jail = jail_for_host(args.job_user, not args.no_network_isolation)
        given = interpreter.configured(args.python, [backend]).get(backend)
        python, how = interpreter.find(workflow.python_env.host_modules, given)
    except (JailError, InterpreterError, ValueError) as exc:
        print(f"ondemand run: {exc}", file=sys.stderr)
        return 2
    if not python.own or given is not None:
        print(f"ondemand run: jobs run on {python.describe()}, {how}", file=sys.stderr)
    run_dir = Path(tempfile.mkdtemp(prefix=f"ondemand-run-{op}-"))
    if jail is not None and jail.user is not None:
        run_dir.chmod(0o711)  # the job user passes through to its workspace
    log_path = run_dir / "job.log"

    stream = LogStream(log_path, None, 0)  # the file keeps a head and tail, as a runner's

    def on_output(data: bytes) -> None:
        stream.write(data)
        if not args.quiet:
            sys.stderr.buffer.write(data)
            sys.stderr.buffer.flush()

    context = _job_context(args, cache, run_dir, on_output, visible, jail, python)
    try:
        result = execute(spec, workflow, context)
    finally:
        stream.close()
    if args.json:
        args.json.write_text(json.dumps(result.model_dump(mode="json"), indent=2) + "\n")
    for name, path in trace_files(context.job_dir / "artifacts"):
        print(f"ondemand run: trace {name}: {path}", file=sys.stderr)
    policy = config.for_op(op)
    print(render(spec, result, log_path, policy), flush=True)
    # After the verdict: the trusted build that warms the next run (runner/daemon/warmup.py).
    quiet = replace(context, on_output=lambda data: None if args.quiet else on_stderr(data))
    warm(spec, workflows[backend], replace(quiet, job_dir=run_dir / "trusted"), local=True)
    if gate_failed(spec, result, policy):
        return 1
    if failures_pass_gate(spec, result, policy):
        return 0
    return EXIT.get(result.status, 2)


def _job_context(
    args: argparse.Namespace,
    cache: Path,
    run_dir: Path,
    on_output: Callable[[bytes], None],
    visible: tuple[str, str] | None,
    jail: Jail | None,
    python: Interpreter,
) -> JobContext:
    """What a job run here is given: this machine's caches under `cache`, its output to
    `on_output`, the options of `ondemand run`."""
    return JobContext(
        workspaces=Workspaces(cache),
        env_cache=cache / "envs",
        job_dir=run_dir / "job",
        runner_name=f"local ({os.uname().nodename})",
        runner_version=runner_version(),
        on_output=on_output,
        visible_devices=visible,
        jail=jail,
        packages=PackageSources.from_args(args),
        interpreter=python,
        compile_cache=None if args.no_compile_cache else CompileCache(cache / "compile"),
        workers=args.workers if args.workers is not None else default_workers(),
        warm_workers=args.warm_workers,
    )


def on_stderr(data: bytes) -> None:
    sys.stderr.buffer.write(data)
    sys.stderr.buffer.flush()
