"""The faults, one every 45–90 s (compressible), seeded, each with its start and end logged:
a replica killed with SIGKILL (back 5–20 s later), a runner killed (restarted), a runner
stopped twice with SIGTERM (restarted once it has left), a runner SIGSTOPped for longer than
its lease then continued, GitHub answering 5xx, 429 or a secondary rate limit's 403 for
20–60 s, PostgreSQL restarted (down 2–8 s) and the balancer restarted. Each fault runs on its
own thread, so they overlap as production's do; `heal` ends them all at once (every process
back, GitHub answering) before the drain. A runner's job Python vanishing for 20–60 s (its
link removed): the runner hands back the jobs it cannot run and is drained after
`drain_after` of them; at the end the Python is back and an operator undrains it."""

from __future__ import annotations

import logging
import random
import signal
import threading
import time
from collections.abc import Callable

from tools.soak.events import FaultRec
from tools.soak.world import Child, World, wait_http

log = logging.getLogger("soak.faults")

# Dealt from a shuffled deck (each kind as often as it stands here, reshuffled when dealt out),
# so that even a short soak meets every kind.
KINDS = (
    "replica_kill",
    "replica_kill",
    "runner_kill",
    "runner_sigterm2",
    "runner_sigstop",
    "runner_python",
    "github_5xx",
    "github_429",
    "github_403",
    "pg_restart",
    "balancer_restart",
)
FOREVER = 1_000_000  # a GitHub fault's count: it lasts until cleared


class Faults:
    """Injects seeded faults into a running `World` until stopped."""

    def __init__(
        self,
        world: World,
        rng: random.Random,
        interval: tuple[float, float] = (45.0, 90.0),
        witness: str | None = None,
    ) -> None:
        self.world = world
        self.witness = witness  # a replica never killed: its memory over the whole run
        self.rng = rng
        self.interval = interval
        self.records: list[FaultRec] = []
        self.healing = threading.Event()  # faults end now
        self.busy: set[str] = set()  # targets under a fault
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self.errors: list[str] = []
        self.deck: list[str] = []

    def run(self, until: float, stop: threading.Event) -> None:
        while not stop.wait(self.rng.uniform(*self.interval)) and time.time() < until:
            self.inject()

    def inject(self) -> None:
        """The next fault of the deck whose target is free (one taken is put back)."""
        for _ in range(len(KINDS)):
            if not self.deck:
                self.deck = list(KINDS)
                self.rng.shuffle(self.deck)
            kind = self.deck.pop()
            plan = self._plan(kind)
            if plan is None:
                self.deck.insert(0, kind)
                continue
            target, act = plan
            thread = threading.Thread(
                target=self._run, args=(kind, target, act), name=f"fault-{kind}", daemon=True
            )
            self.threads.append(thread)
            thread.start()
            return

    def heal(self) -> None:
        """End every fault now and wait until each has put back what it took."""
        self.healing.set()
        for thread in self.threads:
            thread.join(timeout=120)

    # -- the faults ------------------------------------------------------------------------

    def _plan(self, kind: str) -> tuple[str, Callable[[], str]] | None:
        """(target, the fault's whole life: acts, waits, heals; returns a detail) or None
        when no target is free for it."""
        w, rng = self.world, self.rng
        if kind == "replica_kill":
            child = self._free([r for r in w.replicas if r.alive() and r.name != self.witness])
            if child is None:
                return None
            index = w.replicas.index(child)
            down = rng.uniform(5, 20)
            return child.name, lambda: self._replica_kill(child, index, down)
        if kind.startswith("runner_"):
            child = self._free([r for r in w.runners if r.alive()])
            if child is None:
                return None
            if kind == "runner_kill":
                back = rng.uniform(1, 5)
                return child.name, lambda: self._runner_kill(child, back)
            if kind == "runner_python":
                gone = rng.uniform(20, 60)
                return child.name, lambda: self._runner_python(child, gone)
            if kind == "runner_sigterm2":
                back = rng.uniform(1, 3)
                return child.name, lambda: self._runner_sigterm2(child, back)
            stopped = w.options.lease_s + rng.uniform(5, 15)
            return child.name, lambda: self._runner_sigstop(child, stopped)
        if kind.startswith("github_"):
            if not self._take("github"):
                return None
            length = rng.uniform(20, 60)
            if kind == "github_5xx":
                status = rng.choice((500, 502, 503))
                return "github", lambda: self._github(status, length)
            if kind == "github_429":
                after = rng.choice((None, 5, 10))
                return "github", lambda: self._github(429, length, retry_after=after)
            return "github", lambda: self._github(403, length, secondary=True)
        if kind == "pg_restart":
            if not self._take("postgres"):
                return None
            down = rng.uniform(2, 8)
            return "postgres", lambda: self._pg_restart(down)
        if kind == "balancer_restart":
            if not self._take("balancer"):
                return None
            down = rng.uniform(1, 4)
            return "balancer", lambda: self._balancer_restart(down)
        return None

    def _free(self, children: list[Child]) -> Child | None:
        free = [c for c in children if c.name not in self.busy]
        if not free:
            return None
        child = self.rng.choice(free)
        return child if self._take(child.name) else None

    def _take(self, target: str) -> bool:
        with self.lock:
            if target in self.busy:
                return False
            self.busy.add(target)
            return True

    def _run(self, kind: str, target: str, act: Callable[[], str]) -> None:
        start = time.time()
        detail = ""
        try:
            detail = act()
        except Exception as exc:  # a fault that could not heal is a finding of its own
            self.errors.append(f"{kind} on {target}: {exc}")
            detail = f"failed: {exc}"
        finally:
            with self.lock:
                self.records.append(FaultRec(kind, target, start, time.time(), detail))
                self.busy.discard(target)
        log.info("%s on %s: %.1fs %s", kind, target, time.time() - start, detail)

    def _wait(self, seconds: float) -> float:
        """Up to `seconds`, less when healing starts; how long it waited."""
        started = time.monotonic()
        self.healing.wait(seconds)
        return time.monotonic() - started

    def _replica_kill(self, child: Child, index: int, down: float) -> str:
        child.kill()
        down = self._wait(down)
        lives = restart_replica(self.world, child, index)
        return f"down {down:.0f}s, started {lives} time(s)"

    def _runner_kill(self, child: Child, back: float) -> str:
        child.kill()
        self._wait(back)
        child.start()
        return f"restarted after {back:.0f}s"

    def _runner_sigterm2(self, child: Child, back: float) -> str:
        child.send(signal.SIGTERM)
        time.sleep(0.5)
        child.send(signal.SIGTERM)
        left = child.wait(60)
        if not left:
            child.kill()
        self._wait(back)
        child.start()
        return f"left {'by itself' if left else 'killed after 60s'}, restarted"

    def _runner_python(self, child: Child, gone: float) -> str:
        self.world.break_python(child.name)
        gone = self._wait(gone)
        said = self.world.mend_python(child.name)
        return f"job Python gone {gone:.0f}s; {said}"

    def _runner_sigstop(self, child: Child, stopped: float) -> str:
        child.send(signal.SIGSTOP)
        stopped = self._wait(stopped)
        child.send(signal.SIGCONT)
        return f"stopped {stopped:.0f}s"

    def _github(
        self,
        status: int,
        length: float,
        *,
        retry_after: int | None = None,
        secondary: bool = False,
    ) -> str:
        admin = self.world.admin
        assert admin is not None
        admin.inject_fault(
            status,  # type: ignore[arg-type]
            FOREVER,
            retry_after=retry_after,
            kind="secondary" if secondary else "primary",
        )
        length = self._wait(length)
        admin.clear_faults()
        after = f", Retry-After {retry_after}" if retry_after else ""
        return f"{status}{' secondary' if secondary else ''}{after} for {length:.0f}s"

    def _pg_restart(self, down: float) -> str:
        self.world.postgres.stop()
        down = self._wait(down)
        self.world.postgres.resume()
        return f"down {down:.0f}s"

    def _balancer_restart(self, down: float) -> str:
        self.world.restart_balancer(0 if self.healing.is_set() else down)
        return f"down {down:.0f}s"


def restart_replica(world: World, child: Child, index: int, tries: int = 10) -> int:
    """Start a replica again until it answers (it exits at once while PostgreSQL is down);
    how many starts it took."""
    for attempt in range(1, tries + 1):
        child.start()
        try:
            wait_http(child, f"{world.replica_url(index)}/healthz", timeout=30)
            return attempt
        except RuntimeError:
            child.stop(grace=2)
            time.sleep(2)
    raise RuntimeError(f"{child.name} did not come back:\n{child.tail()}")


def summary(records: list[FaultRec]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for f in records:
        counts[f.kind] = counts.get(f.kind, 0) + 1
    return dict(sorted(counts.items()))
