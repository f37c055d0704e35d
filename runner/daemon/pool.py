"""The runner daemon's pool: its settings, registration and slots, under one lifecycle.
Register once, lay out and clean the work directory, then run a worker per device slot
(`runner.daemon.worker`: claim and acknowledge) whose jobs the job runner runs and reports
(`runner.daemon.job_runner`); until a signal stops it.

What it holds is wired in through constructors: `runner.link.credentials` (runner.json,
registering), `runner.daemon.health` (device checks, reported to the service),
`runner.daemon.fitness` (jobs lost to the runner's own infrastructure, and the drain they
lead to) and `ondemand.retry` (the backoff every wait uses).

- A 401 to a claim means the service forgot this runner: it registers again, one slot at a
  time, and tells the new registration its health.
- After `drain_after` jobs in a row lost to the runner's own infrastructure the runner is
  drained: it claims nothing, says why (`/runners/health`, `drained.json`), and claims again
  once its environment check passes or an operator undrains it.
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
from collections.abc import Mapping
from pathlib import Path
from types import FrameType

from ondemand.retry import Backoff, RetryPolicy
from runner.daemon.config import DaemonConfig
from runner.daemon.fitness import Drain, Fitness, environment_check
from runner.daemon.health import Health, run_device_check
from runner.daemon.job_runner import JobRunner, empty
from runner.daemon.worker import Worker
from runner.environment.compile_cache import CompileCache
from runner.environment.interpreter import Interpreter, InterpreterError, find
from runner.job.sandboxing import Jail, JailError, check_jail, jail_for_host, visible_devices
from runner.job.workspace import Workspaces
from runner.link.client import NotHeld, Rejected, ServiceClient, ServiceUnavailable, Unauthorized
from runner.link.credentials import CredentialFile, Credentials, Registration, load_or_register
from workflows.spec import WorkflowSpec

log = logging.getLogger("ondemand.runner")
BACKOFF_BASE_S = 0.5
LEAVE_DEADLINE_S = 60.0  # an ephemeral runner's deregistration is retried this long


def runner_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("ondemand-kernel-tests")
    except metadata.PackageNotFoundError:
        return "0+unknown"


class Daemon:
    """The pool: the runner's lifecycle (register, clean up, serve until signalled), what its
    slots share (the service, the runner's health and fitness, the caches, the jail, the
    signals so far) and a worker per slot, whose jobs `jobs` runs."""

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
        self.jobs = JobRunner(self)
        self.workers = [Worker(self, self.jobs, slot) for slot in range(len(config.devices))]

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

    # -- lifecycle: signals, registration, the slots' directories ------------------------------

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
        plan, devices = self.config.cores, self.config.devices
        for line in plan.describe(devices):
            log.info("%s", line)
        if plan.unpinned and len(devices) > 1:
            log.warning("the slots are not pinned to cores of their own: %s", plan.unpinned)
        threads = [
            threading.Thread(target=worker.run, name=f"slot-{worker.slot}", daemon=True)
            for worker in self.workers
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
            self.jobs.retried("deregister", self.client.deregister, LEAVE_DEADLINE_S)
            log.info("runner %s deregistered", self.config.name)
        except (Unauthorized, NotHeld):
            pass  # the service forgot it already
        except Rejected as exc:
            log.error("cannot deregister: %s", exc)
        except ServiceUnavailable as exc:
            log.error("cannot deregister (%s); the service will see it offline", exc)
        self.credentials.forget()


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


def describe(jail: Jail | None) -> str:
    if jail is None:
        return "as the runner's own user, with network: unconfined"
    if jail.user is None:
        return f"as the runner's own user, without network ({' '.join(jail.prefix)})"
    network = "without network" if jail.network else "with network"
    return f"as {jail.user} in their own PID and mount namespaces, {network}"


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
