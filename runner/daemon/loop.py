"""The runner daemon: register once, then per device slot claim a job, run it, report it.

This module keeps the lifecycle and the claim loop; the rest is wired in through constructors:
`runner.link.credentials` (runner.json, registering), `runner.daemon.health` (device checks,
reported to the service), `runner.daemon.heartbeat` (a job's lease, cancel and loss), and
`ondemand.retry` (the backoff every wait uses).

- Claims long-poll the service; when it is unreachable the slot backs off with jitter and says
  why in the log. A 401 means the service forgot this runner: it registers again.
- The backend's device check runs before claiming (its verdict is reused for
  `check_interval_s`, and redone after a job errors); a failed check stops claims on that
  backend and is reported to the service (`/runners/health`).
- A job lost to the runner's own infrastructure (`runner.daemon.fitness`: a checkout it could
  not make, an environment its check then finds broken, a crash of its own code) is handed
  back (`interrupt`), requeued for another runner, and never claimed here again; after
  `drain_after` such jobs in a row the runner is drained: it claims nothing, says why
  (`/runners/health`, `drained.json`), and claims again once its environment check passes or
  an operator undrains it.
- During a job a heartbeat every third of the lease renews it; an answer saying cancel stops
  the steps; a 404 (the job is no longer ours) stops them and reports nothing.
- First SIGTERM (or SIGINT): stop claiming, finish the current jobs, exit. Second: stop them
  and hand them back (`interrupt`): not the pull request's fault, so the service requeues each
  for its next attempt on any runner; exit. A crash leaves only the per-slot job directories,
  which the next start removes; the service's lease brings the job back.
- Ephemeral (`--ephemeral`, one slot): one job, no trusted build after it, then deregister
  (the token stops working) and exit, for a machine or container made for one job.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import FrameType
from typing import TypeVar

from ondemand.retry import Backoff, RetryPolicy
from runner.daemon.fitness import (
    DEFAULT_DRAIN_AFTER,
    Blame,
    Drain,
    Fitness,
    environment_check,
    needs_check,
    outcome,
)
from runner.daemon.health import Health, run_device_check
from runner.daemon.heartbeat import Heartbeat
from runner.daemon.warmup import warm
from runner.environment.compile_cache import CompileCache
from runner.environment.interpreter import Interpreter, InterpreterError, find
from runner.environment.parallel import default_workers
from runner.environment.pyenv import PackageSources
from runner.job.execute import JobContext, execute
from runner.job.logstream import DEFAULT_LIMIT, LogStream
from runner.job.redact import Redactor, redact_text
from runner.job.sandboxing import Jail, JailError, check_jail, jail_for_host, visible_devices
from runner.job.workspace import Workspaces
from runner.link.client import NotHeld, Rejected, ServiceClient, ServiceUnavailable, Unauthorized
from runner.link.credentials import CredentialFile, Credentials, Registration, load_or_register
from runner.results.progress import ProgressSender
from workflows.models import JobResult, JobSpec, JobStatus
from workflows.spec import WorkflowSpec

log = logging.getLogger("ondemand.runner")
BACKOFF_BASE_S = 0.5
REPORT_DEADLINE_S = 600.0  # keep retrying a result upload this long
REPORT_TRIES_WHEN_STOPPING = 3  # after a second signal, give up sooner
LEAVE_DEADLINE_S = 60.0  # an ephemeral runner's deregistration is retried this long
DRAINED_POLL_S = 2.0  # a drained runner looks for an operator's undrain this often
HAND_BACK_CHARS = 150  # of the error, in the reason a job is handed back with
T = TypeVar("T")


def runner_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("ondemand-kernel-tests")
    except metadata.PackageNotFoundError:
        return "0+unknown"


@dataclass
class DaemonConfig:
    service_url: str
    name: str
    backends: list[str]
    state_dir: Path
    work_dir: Path
    labels: list[str] = field(default_factory=list)
    devices: list[str | None] = field(default_factory=lambda: [None])  # one entry per slot
    registration_token: str | None = None
    poll_s: float = 25.0
    check_interval_s: float = 60.0
    backoff_max_s: float = 30.0
    network_isolation: bool = True
    job_user: str | None = None  # as root: the user steps run as (see runner/job/sandboxing.py)
    packages: PackageSources = field(default_factory=PackageSources)  # for what the host lacks
    grace_s: float = 10.0
    keep_logs: int = 50  # the newest job logs kept in WORK/logs ...
    keep_log_bytes: int = 1024 * 1024 * 1024  # ... within this many bytes in all
    log_max_bytes: int = DEFAULT_LIMIT  # one job's log: its head and tail past this
    progress_interval_s: float = 2.0  # a job's progress goes to the service at most this often
    compile_cache: bool = True  # a shared compile cache filled by trusted builds
    ephemeral: bool = False  # one job, then deregister and exit
    pythons: dict[str, Path] = field(default_factory=dict)  # backend → its jobs' interpreter
    drain_after: int = DEFAULT_DRAIN_AFTER  # jobs lost to this runner in a row; 0: never drain


class Daemon:
    """The runner's lifecycle (register, clean up, serve until signalled) and its slots' claim
    loops."""

    def __init__(
        self,
        config: DaemonConfig,
        workflows: Mapping[str, WorkflowSpec],
        client: ServiceClient | None = None,
    ) -> None:
        unknown = [b for b in config.backends if b not in workflows]
        if unknown:
            raise SystemExit(f"unknown backend(s) {unknown}; known: {sorted(workflows)}")
        self.config = config
        self.workflows = workflows
        self.client = client or ServiceClient(config.service_url)
        self.retry = RetryPolicy(base_s=BACKOFF_BASE_S, cap_s=config.backoff_max_s)
        self.credentials = CredentialFile(config.state_dir / "runner.json", config.service_url)
        self.registration = Registration(
            name=config.name,
            backends=config.backends,
            labels=config.labels,
            slots=len(config.devices),
            version=runner_version(),
        )
        self.stopping = threading.Event()  # first signal: no new claims
        self.stop_now = threading.Event()  # second signal: cancel running jobs
        self.claimed = threading.Event()  # an ephemeral runner took its one job
        self.signal_name: str | None = None  # the signal that stopped it: a cancel says so
        self.cancels: dict[int, threading.Event] = {}
        self.lock = threading.Lock()  # guards `cancels` (also taken by the signal handler)
        self.register_lock = threading.Lock()
        self.interpreters, self.no_python = job_interpreters(config, workflows)
        self.fitness = Fitness(
            state_dir=config.state_dir,
            limit=config.drain_after,
            check=self.environment_check,
            check_interval_s=config.check_interval_s,
            on_change=self.drain_changed,
        )
        self.health = Health(
            workflows=workflows,
            backends=config.backends,
            check_interval_s=config.check_interval_s,
            check=self.check_device,
            report=self.client.health,
            drain=lambda: self.fitness.drain,
        )
        self.workspaces = Workspaces(config.work_dir / "cache")
        compile_root = config.work_dir / "cache" / "compile"
        self.compile_cache = CompileCache(compile_root) if config.compile_cache else None
        try:
            self.jail = jail_for_host(config.job_user, config.network_isolation)
        except JailError as exc:
            raise SystemExit(f"ondemand runner: {exc}") from exc

    def check_device(self, workflow: WorkflowSpec) -> str | None:
        """The backend's device check, run with its job interpreter on slot 0's device in a
        home of its own; None when it passes, else why not (also: no interpreter for it)."""
        if workflow.name in self.no_python:
            return self.no_python[workflow.name]
        first_device = self.config.devices[0] if self.config.devices else None
        return run_device_check(
            workflow,
            home=self.config.work_dir / "check-home",
            visible_devices=visible_devices(workflow.visible_devices_var, first_device),
            python=self.interpreters[workflow.name].executable,
        )

    def environment_check(self) -> str | None:
        """The runner's own environment: its job Pythons run, its working directories take a
        file, its wheelhouse is there. None when all is well, else what is not."""
        work = self.config.work_dir
        slots = [self.slot_dir(i) for i in range(len(self.config.devices))]
        wheelhouse = self.config.packages.wheelhouse
        return environment_check(
            [i.executable for i in self.interpreters.values()],
            [*slots, work / "cache", work / "envs", work / "logs"],
            [wheelhouse] if wheelhouse is not None else [],
        )

    def drain_changed(self, drain: Drain | None, why: str) -> None:
        if drain is not None:
            log.error(
                "%s; claiming nothing until its environment check passes or an operator "
                "undrains it (ondemand runner --undrain)",
                drain.reason,
            )
        else:
            log.warning("%s", why)

    # -- lifecycle -----------------------------------------------------------------------------

    def on_signal(self, signum: int, _frame: FrameType | None) -> None:
        self.signal_name = signal.Signals(signum).name
        if not self.stopping.is_set():
            log.warning("signal %s: no new claims; finishing current jobs (again: cancel)", signum)
            self.stopping.set()
            return
        log.warning("signal %s again: cancelling current jobs", signum)
        self.stop_now.set()
        with self.lock:
            for event in self.cancels.values():
                event.set()

    def register(self) -> Credentials | None:
        """The runner's credentials, retrying while the service is unreachable; None when
        stopped meanwhile or refused."""
        backoff = Backoff(self.retry)
        while not self.stopping.is_set():
            try:
                return load_or_register(
                    self.client,
                    self.credentials,
                    self.config.registration_token,
                    self.registration,
                )
            except ServiceUnavailable as exc:
                delay = backoff.next()
                log.warning("cannot register (%s); retrying in %.1fs", exc, delay)
                self.stopping.wait(delay)
            except (Rejected, NotHeld) as exc:
                log.error(
                    "registration refused: %s (give the runner one of the service's "
                    "ONDEMAND_REGISTRATION_TOKENS: ONDEMAND_REGISTRATION_TOKEN or "
                    "--registration-token-file)",
                    exc,
                )
                return None
            except SystemExit as exc:  # nothing to register with: a configuration error
                log.error("%s", exc)
                return None
        return None

    def reregister(self, refused: str | None) -> bool:
        """Forget the token the service refused and register again (one slot at a time)."""
        with self.register_lock:
            if self.client.token != refused:
                return True  # another slot already did
            if not self.config.registration_token:
                log.error("no registration token to register again with")
                return False
            self.credentials.forget()
            creds = self.register()
            if creds is None:
                return False
            self.client.token = creds.token
            self.health.report_again()  # tell the new registration our health
            return True

    def clean_after_crash(self) -> None:
        """Kill the steps an earlier, crashed daemon left running; remove their directories."""
        jobs = self.config.work_dir / "jobs"
        if jobs.is_dir():
            for pidfile in jobs.glob("*.pgid"):
                kill_orphan(pidfile, self.config.work_dir)
            for stale in jobs.iterdir():
                log.info("removing %s left by an earlier run", stale)
                if stale.is_dir() and not stale.is_symlink() and stale.name.startswith("slot-"):
                    empty(stale)  # the slot's directory stays: other slots' steps cover it
                else:
                    shutil.rmtree(stale, ignore_errors=True)
        self.workspaces.prune_all()

    def lay_out(self) -> None:
        """The work directory's modes: a step (the job user) may pass through to its own
        workspace and read the Python environments; the mirrors, logs and device-check home
        are the runner's alone (and covered in a step's namespace as well)."""
        work = self.config.work_dir
        for path, mode in (
            (work, 0o711),
            (work / "jobs", 0o711),
            (work / "envs", 0o755),
            (work / "cache", 0o700),
            (work / "logs", 0o700),
            (work / "check-home", 0o700),
        ):
            path.mkdir(parents=True, exist_ok=True)
            path.chmod(mode)
        for slot in range(len(self.config.devices)):
            self.slot_dir(slot).mkdir(exist_ok=True)
            self.slot_dir(slot).chmod(0o711)

    def slot_dir(self, slot: int) -> Path:
        return self.config.work_dir / "jobs" / f"slot-{slot}"

    def jail_for(self, slot: int) -> Jail | None:
        """The slot's jail: what a step must not see is covered in its namespace."""
        if self.jail is None:
            return None
        work = self.config.work_dir
        hidden = [work / "cache", work / "logs", work / "check-home"]
        hidden += [self.slot_dir(i) for i in range(len(self.config.devices)) if i != slot]
        if not work.resolve().is_relative_to(self.config.state_dir.resolve()):
            hidden.append(self.config.state_dir)
        return self.jail.hiding(*hidden)

    def run(self) -> int:
        """Serve until signalled; the exit status."""
        self.lay_out()
        if self.jail is not None and self.jail.user is not None:
            pythons = {sys.executable, *(str(i.executable) for i in self.interpreters.values())}
            try:
                for python in sorted(pythons):
                    check_jail(self.jail, python)
            except JailError as exc:
                log.error("%s", exc)
                return 2
        creds = self.register()
        if creds is None:
            return 0 if self.stopping.is_set() else 2
        self.client.token = creds.token
        self.clean_after_crash()
        log.info(
            "runner %s (%s) serving %s with %d slot(s); steps run %s",
            creds.runner_id,
            self.config.name,
            ", ".join(self.config.backends),
            len(self.config.devices),
            describe(self.jail),
        )
        threads = [
            threading.Thread(target=self.slot_loop, args=(i,), name=f"slot-{i}", daemon=True)
            for i in range(len(self.config.devices))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():
                thread.join(timeout=0.5)
        if self.config.ephemeral:
            self.leave()
        log.info("runner %s stopped", self.config.name)
        return 0

    def leave(self) -> None:
        """Deregister (an ephemeral runner, its job done or it stopped), retried a while when
        the service is unreachable; the saved token goes either way: the next start of this
        state directory registers anew."""
        try:
            self.retried("deregister", self.client.deregister, LEAVE_DEADLINE_S)
            log.info("runner %s deregistered", self.config.name)
        except (Unauthorized, NotHeld):
            pass  # the service forgot it already
        except Rejected as exc:
            log.error("cannot deregister: %s", exc)
        except ServiceUnavailable as exc:
            log.error("cannot deregister (%s); the service will see it offline", exc)
        self.credentials.forget()

    # -- the claim loop ------------------------------------------------------------------------

    def slot_loop(self, slot: int) -> None:
        """Claim and run jobs until stopped; a bug in one round is logged, not fatal."""
        backoff = Backoff(self.retry)
        while not (self.stopping.is_set() or self.claimed.is_set()):
            try:
                self.slot_round(slot, backoff)
            except Exception:
                log.exception("slot %d: unexpected error; continuing", slot)
                self.stopping.wait(backoff.next())

    def slot_round(self, slot: int, backoff: Backoff) -> None:
        """One device check and claim, and the job it brings."""
        drained = self.fitness.poll()
        backends = self.health.healthy_backends()
        if not backends:
            wait = DRAINED_POLL_S if drained else min(self.config.check_interval_s, 30)
            self.stopping.wait(wait)
            return
        token = self.client.token
        try:
            spec = self.client.claim(self.config.poll_s, backends, self.fitness.handed_back)
        except Unauthorized as exc:
            log.error("slot %d: the service no longer knows this runner (%s)", slot, exc)
            if not self.reregister(token):
                self.stopping.wait(backoff.next())
            return
        except (ServiceUnavailable, Rejected, NotHeld) as exc:
            delay = backoff.next()
            log.warning("slot %d: claim failed (%s); retrying in %.1fs", slot, exc, delay)
            self.stopping.wait(delay)
            return
        backoff.reset()
        if spec is None:
            return
        if self.stopping.is_set() or self.fitness.drain is not None:
            # The claim was answered after the signal to stop, or after another slot's job
            # drained the runner: not ours to start.
            why = "stopping" if self.stopping.is_set() else "drained"
            log.info("slot %d: %s; giving back job %s", slot, why, spec.id)
            with contextlib.suppress(ServiceUnavailable, Rejected, NotHeld):
                self.client.release(spec.id)
            return
        if not self.acknowledged(slot, spec):
            return
        if self.config.ephemeral:
            self.claimed.set()  # no other claim: after this job, it leaves
        self.run_job(slot, spec)

    def acknowledged(self, slot: int, spec: JobSpec) -> bool:
        """The claim's first heartbeat, before anything of the job starts. An answer that
        waited in a stopped runner's socket (SIGSTOP, a frozen host) may offer a job the
        service took back and gave to another runner meanwhile, even one already finished:
        it is dropped, and so is one stopped meanwhile (its lease lapsed, a cancel): its stop is
        reported without a start. An unreachable service starts it anyway (its heartbeat keeps
        trying)."""
        try:
            answer = self.client.heartbeat(spec.id)
        except NotHeld:
            log.warning(
                "slot %d: job %s was given to another runner meanwhile; not started", slot, spec.id
            )
            return False
        except (ServiceUnavailable, Rejected) as exc:
            log.warning("slot %d: job %s: first heartbeat failed (%s)", slot, spec.id, exc)
            return True
        if answer.cancel:
            log.warning(
                "slot %d: job %s was stopped before it started (%s); not started",
                slot,
                spec.id,
                answer.reason,
            )
            stopped = JobResult(
                status=JobStatus.cancelled, sha=spec.sha, error_message=answer.reason
            )
            self.report(spec, stopped)
            return False
        return True

    def run_job(self, slot: int, spec: JobSpec) -> None:
        """Run a claimed job; report its result, or hand it back where this runner is to blame
        (`runner.daemon.fitness`), which may drain it."""
        workflow = self.workflows[spec.backend]
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
        check = self.environment_check() if needs_check(result) else None
        judged = outcome(spec.id, result, check)
        if result.status is JobStatus.errored and judged.blame is not Blame.runner:
            self.health.invalidate(spec.backend)
        self.fitness.record(judged)  # before the hand-back: a drained runner claims no more
        # Stopped by this daemon's own second signal, not by anyone's cancel: an
        # infrastructure stop, which the service requeues rather than blames on the PR.
        stopped = result.status is JobStatus.cancelled and beat is not None and beat.reason is None
        log.info("slot %d: job %s %s", slot, spec.id, result.status.value)
        if beat is not None and beat.lost:
            log.warning("job %s is no longer held by this runner; not reporting it", spec.id)
        elif stopped:
            why = f"stopped ({self.signal_name or 'stopping'})"
            self.deliver(spec, "interrupt", lambda: self.client.interrupt(spec.id, why))
        elif judged.blame is Blame.runner:
            error = redact_text(judged.error or "no message", [*self.secrets(), spec.git_token])
            why = f"could not run it ({judged.step}: {error[:HAND_BACK_CHARS]})"
            log.warning("job %s: %s; handing it back", spec.id, why)
            self.deliver(spec, "hand back", lambda: self.client.interrupt(spec.id, why))
        else:
            if result.status is JobStatus.cancelled and beat is not None:
                result = result.model_copy(update={"error_message": beat.reason})
            clean = JobResult.model_validate_json(
                redact_text(result.model_dump_json(), [*self.secrets(), spec.git_token])
            )
            self.report(spec, clean)
        self.prune_logs(self.config.work_dir / "logs")
        if context is not None and judged.blame is not Blame.runner:
            self.warm(context, spec, workflow)

    def execute_job(
        self, slot: int, spec: JobSpec, workflow: WorkflowSpec
    ) -> tuple[JobResult, Heartbeat, JobContext]:
        """Run a claimed job with heartbeats and log streaming: its result, its heartbeat
        (lost? cancelled by whom?) and its context."""
        job_dir = self.slot_dir(slot)
        job_dir.mkdir(parents=True, exist_ok=True)
        job_dir.chmod(0o711)
        empty(job_dir)
        pidfile = job_dir.with_suffix(".pgid")
        logs = self.config.work_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        stream = LogStream(
            logs / f"job-{spec.id}.log", self.client, spec.id, limit=self.config.log_max_bytes
        ).start()

        def secrets() -> list[str | None]:  # the job's read token too
            return [*self.secrets(), spec.git_token]

        redacted = Redactor(stream.write, secrets)
        progress = ProgressSender(
            lambda now: self.client.progress(spec.id, now), self.config.progress_interval_s
        )
        cancel = threading.Event()
        with self.lock:  # under the lock: a second signal either sees it or has set stop_now
            self.cancels[spec.id] = cancel
            if self.stop_now.is_set():
                cancel.set()
        log.info("slot %d: job %s: %s on %s at %s", slot, spec.id, spec.op, spec.backend, spec.sha)
        context = JobContext(
            workspaces=self.workspaces,
            env_cache=self.config.work_dir / "envs",
            job_dir=job_dir,
            runner_name=self.config.name,
            runner_version=self.registration.version,
            on_output=redacted.write,
            cancel=cancel,
            visible_devices=visible_devices(
                workflow.visible_devices_var, self.config.devices[slot]
            ),
            jail=self.jail_for(slot),
            packages=self.config.packages,
            interpreter=self.interpreters.get(spec.backend),
            grace_s=self.config.grace_s,
            on_step_start=lambda pid: note_group(pidfile, pid),
            on_progress=progress.update,
            compile_cache=self.compile_cache,
            workers=default_workers(len(self.config.devices)),
        )
        try:
            with Heartbeat(self.client, spec, cancel) as beat, progress:
                try:
                    result = execute(spec, workflow, context)
                finally:
                    pidfile.unlink(missing_ok=True)
        finally:
            redacted.flush()
            stream.close()
            with self.lock:
                self.cancels.pop(spec.id, None)
            empty(job_dir)
        return result, beat, context

    def warm(self, context: JobContext, spec: JobSpec, workflow: WorkflowSpec) -> None:
        """The trusted build of the job's base after its verdict (runner/daemon/warmup.py); a
        first signal to stop cancels it."""
        # An ephemeral runner's caches leave with it: it builds nothing for a next job.
        if self.compile_cache is None or self.stopping.is_set() or self.config.ephemeral:
            return
        context = replace(context, on_output=lambda data: None, cancel=self.stopping)
        try:
            result = warm(spec, workflow, context)
        finally:
            context.job_dir.with_suffix(".pgid").unlink(missing_ok=True)
            empty(context.job_dir)
        if result is not None:
            log.info("trusted build of %s: %s", (spec.base_sha or "")[:10], result.status.value)

    def secrets(self) -> list[str | None]:
        """What must never leave the runner in a job's log or result."""
        return [self.client.token, self.config.registration_token]

    def report(self, spec: JobSpec, result: JobResult) -> None:
        """Upload the job's result (see `deliver`)."""
        self.deliver(spec, "report", lambda: self.client.complete(spec.id, result))

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
        backoff = Backoff(self.retry)
        deadline = time.monotonic() + deadline_s
        while True:
            try:
                return call()
            except ServiceUnavailable as exc:
                hurry = self.stop_now.is_set() and backoff.failures > REPORT_TRIES_WHEN_STOPPING
                if time.monotonic() > deadline or hurry:
                    raise
                delay = backoff.next()
                log.warning("%s failed (%s); retrying in %.1fs", what, exc, delay)
                time.sleep(delay)

    def prune_logs(self, logs: Path) -> None:
        """Keep the newest `keep_logs` job logs, and of those only as many as fit in
        `keep_log_bytes` (the newest always stays)."""
        files = sorted(logs.glob("job-*.log"), key=lambda p: p.stat().st_mtime, reverse=True)
        total = 0
        for rank, path in enumerate(files):
            try:
                total += path.stat().st_size
            except OSError:
                continue
            if rank > 0 and (rank >= self.config.keep_logs or total > self.config.keep_log_bytes):
                path.unlink(missing_ok=True)


def job_interpreters(
    config: DaemonConfig, workflows: Mapping[str, WorkflowSpec]
) -> tuple[dict[str, Interpreter], dict[str, str]]:
    """Each backend's job interpreter (said in the log), and for a backend none was found for,
    why: it is then reported sick and takes no job. A configured one that cannot be used stops
    the runner (SystemExit), naming the setting."""
    found: dict[str, Interpreter] = {}
    missing: dict[str, str] = {}
    for backend in config.backends:
        modules = workflows[backend].python_env.host_modules
        given = config.pythons.get(backend)
        try:
            chosen, how = find(modules, given)
        except InterpreterError as exc:
            if given is not None:
                raise SystemExit(f"ondemand runner: --python for {backend}: {exc}") from exc
            log.error("backend %s: %s", backend, exc)
            missing[backend] = str(exc)
            continue
        found[backend] = chosen
        log.info("backend %s: jobs run on %s, %s", backend, chosen.describe(), how)
    return found, missing


def empty(directory: Path) -> None:
    """Remove what is in `directory`, keeping the directory itself: the other slots' steps
    have it covered in their namespaces, and a new one in its place would not be."""
    for entry in directory.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


def describe(jail: Jail | None) -> str:
    if jail is None:
        return "as the runner's own user, with network: unconfined"
    if jail.user is None:
        return f"as the runner's own user, without network ({' '.join(jail.prefix)})"
    network = "without network" if jail.network else "with network"
    return f"as {jail.user} in their own PID and mount namespaces, {network}"


def note_group(pidfile: Path, pid: int) -> None:
    """Add a started step's process group to its job's `pidfile`: a job may have several at
    once (a comparison keeps a worker process per tree), and each must be found after a crash."""
    with pidfile.open("a", encoding="ascii") as handle:
        handle.write(f"{pid}\n")


def kill_orphan(pidfile: Path, work_dir: Path) -> None:
    """SIGKILL each process group in `pidfile` whose leader still works under `work_dir`
    (checked through /proc, so a reused pid of some other program is left alone)."""
    try:
        lines = pidfile.read_text().split()
    except OSError:
        lines = []
    for line in lines:
        try:
            pid = int(line)
            cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
        except (OSError, ValueError):
            continue
        if cwd.is_relative_to(work_dir.resolve()):
            log.warning("killing process group %s left running by a crashed runner", pid)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
    pidfile.unlink(missing_ok=True)


def serve(config: DaemonConfig, workflows: Mapping[str, WorkflowSpec]) -> int:
    """Run the daemon in this process with signal handlers installed. A configuration it cannot
    start with (a job user or job Python that cannot serve) is said in one line, exit 2: the
    units do not restart that in a loop."""
    try:
        daemon = Daemon(config, workflows)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    signal.signal(signal.SIGTERM, daemon.on_signal)
    signal.signal(signal.SIGINT, daemon.on_signal)
    try:
        return daemon.run()
    finally:
        daemon.client.close()
