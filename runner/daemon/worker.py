"""One slot's worker: claim a job and acknowledge it, then hand it to the job runner; round
after round until the runner stops.

- Claims long-poll the service; when it is unreachable the slot backs off with jitter and says
  why in the log. A 401 means the service forgot this runner: the pool registers it again.
- The backend's device check runs before claiming (`runner.daemon.health`: its verdict is
  reused for `check_interval_s`, and redone after a job errors); a failed check stops claims
  on that backend. A drained runner (`runner.daemon.fitness`) claims nothing until its
  environment check passes or an operator undrains it.
- A claim answered after the signal to stop, or after another slot's job drained the runner,
  is given back unstarted; so is one the claim's first heartbeat says is no longer ours or
  was stopped meanwhile.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from typing import Protocol

from ondemand.retry import Backoff, RetryPolicy
from runner.daemon.config import DaemonConfig
from runner.daemon.cores import pin_thread
from runner.daemon.fitness import Fitness
from runner.daemon.health import Health
from runner.daemon.job_runner import JobRunner
from runner.link.client import NotHeld, Rejected, ServiceClient, ServiceUnavailable, Unauthorized
from workflows.models import JobResult, JobSpec, JobStatus

log = logging.getLogger("ondemand.runner")
DRAINED_POLL_S = 2.0  # a drained runner looks for an operator's undrain this often


class ClaimPool(Protocol):
    """What a slot's worker reads of its pool (`runner.daemon.pool.Daemon`): the settings, the
    service, which backends are healthy, whether the runner is drained or stopping, and how
    it registers again."""

    config: DaemonConfig
    client: ServiceClient
    retry: RetryPolicy
    fitness: Fitness
    health: Health
    stopping: threading.Event  # a first signal: no new claims
    claimed: threading.Event  # an ephemeral runner took its one job

    def reregister(self, refused: str | None) -> bool: ...


class Worker:
    """The claim loop of one slot of the pool; its jobs run through `jobs`."""

    def __init__(self, pool: ClaimPool, jobs: JobRunner, slot: int) -> None:
        self.pool, self.jobs, self.slot = pool, jobs, slot

    def run(self) -> None:
        """Claim and run jobs until stopped; a bug in one round is logged, not fatal."""
        pool = self.pool
        # The slot's cores: every step, check and build this thread starts inherits them.
        pin_thread(pool.config.cores.cores(self.slot))
        backoff = Backoff(pool.retry)
        while not (pool.stopping.is_set() or pool.claimed.is_set()):
            try:
                self.claim_and_run(backoff)
            except Exception:
                log.exception("slot %d: unexpected error; continuing", self.slot)
                pool.stopping.wait(backoff.next())

    def claim_and_run(self, backoff: Backoff) -> None:
        """One device check and claim, and the job it brings."""
        pool, slot = self.pool, self.slot
        drained = pool.fitness.poll()
        backends = pool.health.healthy_backends()
        if not backends:
            wait = DRAINED_POLL_S if drained else min(pool.config.check_interval_s, 30)
            pool.stopping.wait(wait)
            return
        token = pool.client.token
        try:
            spec = pool.client.claim(pool.config.poll_s, backends, pool.fitness.handed_back)
        except Unauthorized as exc:
            log.error("slot %d: the service no longer knows this runner (%s)", slot, exc)
            if not pool.reregister(token):
                pool.stopping.wait(backoff.next())
            return
        except (ServiceUnavailable, Rejected, NotHeld) as exc:
            delay = backoff.next()
            log.warning("slot %d: claim failed (%s); retrying in %.1fs", slot, exc, delay)
            pool.stopping.wait(delay)
            return
        backoff.reset()
        if spec is None:
            return
        if pool.stopping.is_set() or pool.fitness.drain is not None:
            # The claim was answered after the signal to stop, or after another slot's job
            # drained the runner: not ours to start.
            why = "stopping" if pool.stopping.is_set() else "drained"
            log.info("slot %d: %s; giving back job %s", slot, why, spec.id)
            with contextlib.suppress(ServiceUnavailable, Rejected, NotHeld):
                pool.client.release(spec.id)
            return
        if not self.acknowledged(spec):
            return
        if pool.config.ephemeral:
            pool.claimed.set()  # no other claim: after this job, it leaves
        self.jobs.run_job(slot, spec)

    def acknowledged(self, spec: JobSpec) -> bool:
        """The claim's first heartbeat, before anything of the job starts. An answer that
        waited in a stopped runner's socket (SIGSTOP, a frozen host) may offer a job the
        service took back and gave to another runner meanwhile, even one already finished:
        it is dropped, and so is one stopped meanwhile (its lease lapsed, a cancel): its stop is
        reported without a start. An unreachable service starts it anyway (its heartbeat keeps
        trying)."""
        slot = self.slot
        try:
            answer = self.pool.client.heartbeat(spec.id)
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
            self.jobs.report(spec, stopped)
            return False
        return True
