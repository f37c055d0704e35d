"""A job's share of the runner's compile cache (`runner.environment.compile_cache`): its own
Triton cache, seeded once from the trusted builds' layer; whether its commit may compile
kernels that layer lacks, and so how many xdist workers its tests get; the test times the
last trusted build recorded; and, for a trusted build, what it publishes back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from runner.environment import compile_cache, parallel
from runner.environment.compile_cache import CompileCache
from runner.job.sandboxing import give
from runner.job.workspace import Workspaces
from workflows.models import JobSpec, JobStatus


class JobCompiles:
    """One job's use of the shared compile cache `cache` (None: the job compiles in its HOME
    alone); `cold` and `warm` are its xdist widths with kernels to compile and to load."""

    def __init__(
        self,
        spec: JobSpec,
        cache: CompileCache | None,
        job_dir: Path,
        workspaces: Workspaces,
        log: Callable[[str], None],
        cold: int,
        warm: int | None,
    ) -> None:
        self.spec, self.cache, self.job_dir = spec, cache, job_dir
        self.workspaces, self.log = workspaces, log
        self.cold, self.warm = cold, warm
        self.seeded: int | None = None  # entries the private compile cache started with
        self._anew: bool | None = None  # see compiles_anew()

    @property
    def private(self) -> Path:
        """The job's own Triton cache (`TRITON_CACHE_DIR`)."""
        return self.job_dir / "compile" / "triton"

    def layer(self) -> Path:
        """The shared layer of the job's repository and backend."""
        assert self.cache is not None
        return self.cache.layer(self.spec.clone_url, self.spec.backend)

    def durations(self) -> Path | None:
        """The test times of the repository's last trusted build, where the cache has them."""
        if self.cache is None:
            return None
        path = self.layer() / compile_cache.DURATIONS
        return path if path.is_file() else None

    def workers(self, mirror: Path | None) -> int:
        """xdist workers: fewer once the kernels load instead of compiling (loading is quick,
        and more processes on one device then cost more than they share); the cold width for
        a commit whose sources differ from the trusted build's (it compiles what it changed).
        `mirror`: the repository's mirror, None before the checkout."""
        if not self.seeded or self.compiles_anew(mirror):
            return self.cold
        if self.warm is not None:
            return self.warm
        return min(parallel.WARM_WORKERS, self.cold)

    def compiles_anew(self, mirror: Path | None) -> bool:
        """Whether the job's commit may compile kernels its seeded cache lacks: its sources
        differ from the newest trusted build's commit (tests, docs and benchmarks aside).
        Decided once, and said in the log."""
        if self._anew is None:
            assert self.cache is not None  # seeded
            built = self.cache.built(self.layer())
            if self.spec.sha in built:
                self._anew = False
            elif not built or mirror is None:
                self._anew = True
            else:
                trusted = built[-1]
                changed = self.workspaces.changed_paths(mirror, trusted, self.spec.sha)
                self._anew = changed is None or parallel.may_compile_anew(changed)
                if self._anew:
                    self.log(
                        f"sources differ from trusted build {trusted[:10]}: "
                        "what they change compiles, with the cold width"
                    )
        return self._anew

    def private_cache(self, owner: tuple[int, int] | None) -> Path:
        """The job's own Triton cache, seeded once from the shared layer (compile_cache.py),
        `owner`'s (the job user's, where steps run as one)."""
        private = self.private
        if self.seeded is None:
            layer = self.layer()
            give(private.parent, owner, 0o700)
            self.seeded = compile_cache.seed(layer, private, owner)
            self.log(f"compile cache: {self.seeded} kernels from trusted builds")
        return private

    def publish(self, status: JobStatus) -> None:
        """A trusted build's end: the kernels it compiled into the shared layer (its commit
        recorded as built where its tests ran to a verdict), and its tests' times."""
        if self.cache is None or self.seeded is None:
            return
        layer = self.layer()
        ran = status in (JobStatus.succeeded, JobStatus.failed)
        sha = self.spec.sha
        added = compile_cache.publish(self.private, layer, sha if ran else None)
        self.log(f"compile cache: {added} kernels published from trusted build {sha[:10]}")
        if ran:
            compile_cache.record_durations(self.job_dir / "artifacts" / "junit.xml", layer)
