"""A claimed job on its slot, from start to what the service is told: run with a heartbeat
(`runner.daemon.heartbeat`: its lease, a cancel, its loss), its log streamed and its progress
sent, then its result reported, or the job handed back where this runner is to blame
(`runner.daemon.fitness`); each delivery retried while the service is unreachable. After it,
the job logs are pruned and the trusted build of its base warms the next job
(`runner.daemon.warmup`).

- During a job a heartbeat every third of the lease renews it; an answer saying cancel stops
  the steps; a 404 (the job is no longer ours) stops them and reports nothing.
- A job lost to the runner's own infrastructure (a checkout it could not make, an
  environment its check then finds broken, a crash of its own code) is handed back
  (`interrupt`), requeued for another runner; so is one stopped by the daemon's own second
  signal: not the pull request's fault.
"""

from __future__ import annotations

import gzip
import logging
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Protocol, TypeVar

from ondemand.retry import Backoff, RetryPolicy
from runner.daemon.config import DaemonConfig
from runner.daemon.cores import span
from runner.daemon.fitness import Blame, Fitness, needs_check, outcome
from runner.daemon.health import Health
from runner.daemon.heartbeat import Heartbeat
from runner.daemon.warmup import warm
from runner.environment.compile_cache import CompileCache
from runner.environment.interpreter import Interpreter
from runner.environment.parallel import default_workers
from runner.job.execute import JobContext, execute
from runner.job.kinds.benchmark.profiling import trace_files
from runner.job.logstream import LogStream
from runner.job.redact import Redactor, redact_text
from runner.job.sandboxing import Jail, visible_devices
from runner.job.workspace import Workspaces
from runner.link.client import NotHeld, Rejected, ServiceClient, ServiceUnavailable
from runner.link.credentials import Registration
from runner.results.progress import ProgressSender
from workflows.models import JobResult, JobSpec, JobStatus, SlotInfo
from workflows.spec import WorkflowSpec

log = logging.getLogger("ondemand.runner")
REPORT_DEADLINE_S = 600.0  # keep retrying a result upload this long
REPORT_TRIES_WHEN_STOPPING = 3  # after a second signal, give up sooner
ARTIFACT_DEADLINE_S = 60.0  # keep retrying an artifact upload this long
HAND_BACK_CHARS = 150  # of the error, in the reason a job is handed back with
T = TypeVar("T")


class JobPool(Protocol):
    """What the job runner reads of the pool it runs in (`runner.daemon.pool.Daemon`): the
    settings, the service, the runner's health and fitness, its slots, and its signals."""

    config: DaemonConfig
    workflows: Mapping[str, WorkflowSpec]
    client: ServiceClient
    retry: RetryPolicy
    registration: Registration
    interpreters: dict[str, Interpreter]
    fitness: Fitness
    health: Health
    workspaces: Workspaces
    compile_cache: CompileCache | None
    stopping: threading.Event  # a first signal: no trusted build after the job
    stop_now: threading.Event  # a second: cancel the job, hurry its report
    signal_name: str | None
    cancels: dict[int, threading.Event]  # each running job's cancel, by job id
    lock: threading.Lock  # guards `cancels`

    def environment_check(self) -> str | None: ...

    def slot_dir(self, slot: int) -> Path: ...

    def jail_for(self, slot: int) -> Jail | None: ...


class JobRunner:
    """Runs the pool's claimed jobs, one per slot at a time, and delivers how each ended."""

    def __init__(self, pool: JobPool) -> None:
        self.pool = pool

    def run_job(self, slot: int, spec: JobSpec) -> None:
        """Run a claimed job; report its result, or hand it back where this runner is to blame
        (`runner.daemon.fitness`), which may drain it."""
        pool = self.pool
        workflow = pool.workflows[spec.backend]
        beat: Heartbeat | None = None
        context: JobContext | None = None
        try:
            result, beat, context = self.execute_job(slot, spec, workflow)
        except Exception as exc:  # the runner's own code: the job is not the PR's to lose
            log.exception("slot %d: job %s: the runner failed", slot, spec.id)
            result = JobResult(
                status=JobStatus.errored,
                sha=spec.sha,
                error_step="runner",
                error_message=f"{type(exc).__name__}: {exc}",
            )
        check = pool.environment_check() if needs_check(result) else None
        judged = outcome(spec.id, result, check)
        if result.status is JobStatus.errored and judged.blame is not Blame.runner:
            pool.health.invalidate(spec.backend)
        pool.fitness.record(judged)  # before the hand-back: a drained runner claims no more
        # Stopped by this daemon's own second signal, not by anyone's cancel: an
        # infrastructure stop, which the service requeues rather than blames on the PR.
        stopped = result.status is JobStatus.cancelled and beat is not None and beat.reason is None
        log.info("slot %d: job %s %s", slot, spec.id, result.status.value)
        if beat is not None and beat.lost:
            log.warning("job %s is no longer held by this runner; not reporting it", spec.id)
        elif stopped:
            why = f"stopped ({pool.signal_name or 'stopping'})"
            self.deliver(spec, "interrupt", lambda: pool.client.interrupt(spec.id, why))
        elif judged.blame is Blame.runner:
            error = redact_text(judged.error or "no message", [*self.secrets(), spec.git_token])
            why = f"could not run it ({judged.step}: {error[:HAND_BACK_CHARS]})"
            log.warning("job %s: %s; handing it back", spec.id, why)
            self.deliver(spec, "hand back", lambda: pool.client.interrupt(spec.id, why))
        else:
            if result.status is JobStatus.cancelled and beat is not None:
                result = result.model_copy(update={"error_message": beat.reason})
            clean = JobResult.model_validate_json(
                redact_text(result.model_dump_json(), [*self.secrets(), spec.git_token])
            )
            self.report(spec, clean)
        self.prune_logs(pool.config.work_dir / "logs")
        if context is not None and judged.blame is not Blame.runner:
            self.warm(context, spec, workflow)

    def execute_job(
        self, slot: int, spec: JobSpec, workflow: WorkflowSpec
    ) -> tuple[JobResult, Heartbeat, JobContext]:
        """Run a claimed job with heartbeats and log streaming: its result, its heartbeat
        (lost? cancelled by whom?) and its context."""
        pool, config = self.pool, self.pool.config
        job_dir = pool.slot_dir(slot)
        job_dir.mkdir(parents=True, exist_ok=True)
        job_dir.chmod(0o711)
        empty(job_dir)
        pidfile = job_dir.with_suffix(".pgid")
        logs = config.work_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        stream = LogStream(
            logs / f"job-{spec.id}.log", pool.client, spec.id, limit=config.log_max_bytes
        ).start()

        def secrets() -> list[str | None]:  # the job's read token too
            return [*self.secrets(), spec.git_token]

        redacted = Redactor(stream.write, secrets)
        progress = ProgressSender(
            lambda now: pool.client.progress(spec.id, now), config.progress_interval_s
        )
        cancel = threading.Event()
        with pool.lock:  # under the lock: a second signal either sees it or has set stop_now
            pool.cancels[spec.id] = cancel
            if pool.stop_now.is_set():
                cancel.set()
        log.info("slot %d: job %s: %s on %s at %s", slot, spec.id, spec.op, spec.backend, spec.sha)
        cores = config.cores.cores(slot)
        context = JobContext(
            workspaces=pool.workspaces,
            env_cache=config.work_dir / "envs",
            job_dir=job_dir,
            runner_name=config.name,
            runner_version=pool.registration.version,
            on_output=redacted.write,
            cancel=cancel,
            visible_devices=visible_devices(workflow.visible_devices_var, config.devices[slot]),
            jail=pool.jail_for(slot),
            packages=config.packages,
            interpreter=pool.interpreters.get(spec.backend),
            grace_s=config.grace_s,
            on_step_start=lambda pid: note_group(pidfile, pid),
            on_progress=progress.update,
            compile_cache=pool.compile_cache,
            # A pinned slot's thread sees only its own cores: they are the slot's share.
            workers=default_workers(1 if cores else len(config.devices)),
            slot=SlotInfo(index=slot, device=config.devices[slot], cores=span(cores) or None),
        )
        try:
            with Heartbeat(pool.client, spec, cancel) as beat, progress:
                try:
                    result = execute(spec, workflow, context)
                finally:
                    pidfile.unlink(missing_ok=True)
                if result.profile is not None:  # while held: before the directory is emptied
                    self.upload_traces(spec, job_dir / "artifacts")
        finally:
            redacted.flush()
            stream.close()
            with pool.lock:
                pool.cancels.pop(spec.id, None)
            empty(job_dir)
        return result, beat, context

    def upload_traces(self, spec: JobSpec, artifacts: Path) -> None:
        """Upload a profiling job's traces (gzip, redacted as its log is) as its artifacts;
        one the service refuses or cannot take is logged and left out (the profile is never
        the verdict)."""
        for name, path in trace_files(artifacts):
            text = redact_text(path.read_text(errors="replace"), [*self.secrets(), spec.git_token])
            data = gzip.compress(text.encode(), compresslevel=6)
            try:
                self.retried(
                    f"job {spec.id}: artifact {name}",
                    partial(self.pool.client.upload_artifact, spec.id, name, data),
                    ARTIFACT_DEADLINE_S,
                )
            except (NotHeld, Rejected, ServiceUnavailable) as exc:
                log.warning("job %s: artifact %s not uploaded: %s", spec.id, name, exc)

    def warm(self, context: JobContext, spec: JobSpec, workflow: WorkflowSpec) -> None:
        """The trusted build of the job's base after its verdict (runner/daemon/warmup.py); a
        first signal to stop cancels it."""
        pool = self.pool
        # An ephemeral runner's caches leave with it: it builds nothing for a next job.
        if pool.compile_cache is None or pool.stopping.is_set() or pool.config.ephemeral:
            return
        context = replace(context, on_output=lambda data: None, cancel=pool.stopping)
        try:
            result = warm(spec, workflow, context)
        finally:
            context.job_dir.with_suffix(".pgid").unlink(missing_ok=True)
            empty(context.job_dir)
        if result is not None:
            log.info("trusted build of %s: %s", (spec.base_sha or "")[:10], result.status.value)

    def secrets(self) -> list[str | None]:
        """What must never leave the runner in a job's log or result."""
        return [self.pool.client.token, self.pool.config.registration_token]

    def report(self, spec: JobSpec, result: JobResult) -> None:
        """Upload the job's result (see `deliver`)."""
        self.deliver(spec, "report", lambda: self.pool.client.complete(spec.id, result))

    def deliver(self, spec: JobSpec, what: str, call: Callable[[], str]) -> None:
        """Tell the service how the job ended (`call`: its result, or that this runner
        stopped it); retried while the service is unreachable (about ten minutes, a few tries
        once a second signal asked to stop now)."""
        try:
            status = self.retried(f"job {spec.id}: {what}", call, REPORT_DEADLINE_S)
            log.info("job %s: %s: %s", spec.id, what, status)
        except NotHeld:
            log.warning("job %s: not held any more; result dropped", spec.id)
        except Rejected as exc:
            log.error("job %s: result refused: %s", spec.id, exc)
        except ServiceUnavailable as exc:
            log.error("job %s: giving up (%s): %s", spec.id, what, exc)

    def retried(self, what: str, call: Callable[[], T], deadline_s: float) -> T:
        """`call`, tried again while the service is unreachable, for `deadline_s` (a few
        tries once a second signal asked to stop now); then its ServiceUnavailable. Other
        errors are raised at once."""
        backoff = Backoff(self.pool.retry)
        deadline = time.monotonic() + deadline_s
        while True:
            try:
                return call()
            except ServiceUnavailable as exc:
                hurry = (
                    self.pool.stop_now.is_set() and backoff.failures > REPORT_TRIES_WHEN_STOPPING
                )
                if time.monotonic() > deadline or hurry:
                    raise
                delay = backoff.next()
                log.warning("%s failed (%s); retrying in %.1fs", what, exc, delay)
                time.sleep(delay)

    def prune_logs(self, logs: Path) -> None:
        """Keep the newest `keep_logs` job logs, and of those only as many as fit in
        `keep_log_bytes` (the newest always stays)."""
        config = self.pool.config
        files = sorted(logs.glob("job-*.log"), key=lambda p: p.stat().st_mtime, reverse=True)
        total = 0
        for rank, path in enumerate(files):
            try:
                total += path.stat().st_size
            except OSError:
                continue
            if rank > 0 and (rank >= config.keep_logs or total > config.keep_log_bytes):
                path.unlink(missing_ok=True)


def empty(directory: Path) -> None:
    """Remove what is in `directory`, keeping the directory itself: the other slots' steps
    have it covered in their namespaces, and a new one in its place would not be."""
    for entry in directory.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def note_group(pidfile: Path, pid: int) -> None:
    """Add a started step's process group to its job's `pidfile`: a job may have several at
    once (a comparison keeps a worker process per tree), and each must be found after a crash."""
    with pidfile.open("a", encoding="ascii") as handle:
        handle.write(f"{pid}\n")
