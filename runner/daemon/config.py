"""The runner daemon's settings (`DaemonConfig`): what `ondemand runner`'s options and
environment say, read by the pool, its slots' workers and the job runner alike."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from runner.daemon.cores import CorePlan
from runner.daemon.fitness import DEFAULT_DRAIN_AFTER
from runner.environment.pyenv import PackageSources
from runner.job.logstream import DEFAULT_LIMIT


@dataclass
class DaemonConfig:
    service_url: str
    name: str
    backends: list[str]
    state_dir: Path
    work_dir: Path
    labels: list[str] = field(default_factory=list)
    devices: list[str | None] = field(default_factory=lambda: [None])  # one entry per slot
    # Each slot's CPU cores (runner/daemon/cores.py); the default pins nothing.
    cores: CorePlan = field(default_factory=lambda: CorePlan((), (), "not asked"))
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
