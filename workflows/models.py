"""The job a runner claims and the result it uploads: one schema shared by service and runner.

These are the wire format of the runner API (`/api/v1/jobs/claim` answers a `JobSpec`,
`/api/v1/jobs/{id}/complete` takes a `JobResult`) and the input of the report renderer.
"""

from __future__ import annotations

import copy
import math
import re
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

M = TypeVar("M", bound=BaseModel)


class JobStatus(StrEnum):
    """Lifecycle of a job. The last seven are final."""

    queued = "queued"
    running = "running"
    succeeded = "succeeded"
    failed = "failed"  # the suites ran and something failed
    errored = "errored"  # the infrastructure failed: checkout, environment, device, runner lost
    cancelled = "cancelled"
    superseded = "superseded"  # the PR moved to a new head before the job started
    timed_out = "timed_out"

    @property
    def final(self) -> bool:
        return self not in (JobStatus.queued, JobStatus.running)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


def known_part(model: type[M], data: Any) -> tuple[M, list[str]]:
    """`data` as `model`, less the fields it does not know at any depth, and their dotted
    paths: what a newer peer added (the service's claims, the runner's results) is left out,
    not a refusal, so either side may be upgraded first. Any other error raises
    ValidationError as ever."""
    dropped: list[str] = []
    while True:
        try:
            return model.model_validate(data), dropped
        except ValidationError as exc:
            errors = exc.errors()
            extra = [e["loc"] for e in errors if e["type"] == "extra_forbidden"]
            if not extra or len(extra) != len(errors):
                raise
            if not dropped:  # the caller's data is left as it came: cut a copy
                data = copy.deepcopy(data)
            for loc in extra:
                parent = data
                for part in loc[:-1]:
                    parent = parent[part]
                del parent[loc[-1]]
                dropped.append(".".join(str(part) for part in loc))


class JobOptions(_Model):
    """Switches from the command line: `--no-bench`, `--no-compare`, `vs REF`, `/test
    profile`."""

    bench: bool = True
    compare: bool = True
    # Compare with `base_sha` itself (`/test ... vs REF`: a release, any commit), not with the
    # merge base of the head and it.
    exact_base: bool = False
    # `/test profile`: after the comparison, the rows that changed most are profiled on both
    # sides (`JobResult.profile`); never part of the verdict.
    profile: bool = False


class JobSpec(_Model):
    """What a runner needs to run one (operator, backend) on one pinned commit."""

    id: int
    repo: str = Field(description="owner/name on GitHub")
    clone_url: str
    pr_number: int
    sha: str = Field(description="the head SHA pinned when the command was approved")
    base_ref: str | None = None
    base_sha: str | None = None
    op: str
    backend: str
    options: JobOptions = Field(default_factory=JobOptions)
    lease_seconds: int = 120
    attempt: int = 1
    git_token: str | None = Field(
        default=None,
        repr=False,
        description="a private repository's read token for git (that repository, contents "
        "read, an hour's life); never in a log or a result",
    )


class StepStatus(StrEnum):
    succeeded = "succeeded"
    failed = "failed"  # ran to the end with a non-zero exit that means "tests failed"
    errored = "errored"  # could not run, crashed, or exited in a way that is not a test verdict
    timed_out = "timed_out"
    cancelled = "cancelled"
    skipped = "skipped"


class StepResult(_Model):
    name: str
    status: StepStatus
    exit_code: int | None = None
    duration_s: float = 0.0
    message: str | None = Field(default=None, description="why, when not succeeded")
    log_tail: str | None = Field(default=None, description="last lines of the step's output")


class TestFailure(_Model):
    __test__ = False  # not a pytest class

    test_id: str
    message: str
    traceback_tail: str = ""


class SkipGroup(_Model):
    reason: str
    count: int


class ProofLine(_Model):
    message: str
    count: int


class Proof(_Model):
    """The proof-log lines an accuracy step saw (the workflow's `proof`), most frequent first;
    none means no implementation that logs this prefix ran, which the report warns of where
    the checkout holds a specialization of the operator (`specialization`)."""

    prefix: str
    lines: list[ProofLine] = Field(default_factory=list)
    specialization: str | None = Field(
        default=None,
        description="where the checkout holds the vendor's specialization of the operator "
        "(the workflow's `proof.specialization`); None: it holds none the workflow knows",
    )


class AccuracyResult(_Model):
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    failures: list[TestFailure] = Field(default_factory=list)
    skips: list[SkipGroup] = Field(default_factory=list)
    implementation: str | None = Field(
        default=None, description="active implementation, e.g. kernels.backends._mthreads.ops..."
    )
    proof: Proof | None = None

    @property
    def total(self) -> int:
        return self.passed + self.failed + self.errors + self.skipped


class Rounds(_Model):
    """One side of a row over the rounds of a comparison: how many rounds it was timed in, the
    median of its per-round latencies and that median's distribution-free 95 % interval."""

    rounds: int = Field(ge=1)
    median: float
    low: float | None = Field(description="None: too few rounds to bound it")
    high: float | None


class Change(_Model):
    """A row's kernel latency after (the pull request) over before (its merge base), from
    rounds that timed both in turn: the median of the rounds' ratios and its 95 % interval
    (low, high; None where too few rounds bound it). 1.12 is 12 % slower."""

    rounds: int = Field(ge=1)
    ratio: float
    low: float | None
    high: float | None


MAX_SAMPLES = 1000  # per-round latencies kept per side of a row
MAX_PROCESSES = 100  # per-process host times kept per side of a row


class BenchmarkRow(_Model):
    dtype: str
    size: list[int] = Field(description="input shape")
    output_size: list[int] | None = None
    reference_ms: float
    kernel_ms: float
    speedup: float
    # Over a comparison's rounds: the 95 % interval of the median of the per-round speedups
    # (distribution-free; None with fewer than six rounds, or without rounds).
    speedup_low: float | None = None
    speedup_high: float | None = None
    gbps: float | None = None
    bandwidth_fraction: float | None = None
    # Host time per call (µs): 1,000 back-to-back calls synchronized once, PyTorch's and ours.
    reference_host_us: float | None = None
    kernel_host_us: float | None = None
    # Timed runs each side's latency is the median over (the timer stops once it is settled).
    reference_runs: int | None = None
    kernel_runs: int | None = None
    # The row's reach, where measured: the fastest one-launch mover of its minimum traffic.
    reach_ms: float | None = None
    reach_layout: str | None = None
    # Filled when the operator also exists on the merge base: the same row measured there.
    before_kernel_ms: float | None = None
    before_speedup: float | None = None
    # A comparison's rounds (docs/benchmark-json.md): each side's latency per round, paired by
    # index (round i timed the reference, the merge base and the pull request in turn), their
    # summaries, and the change with its interval, which is what the report judges.
    reference_samples_ms: list[float] | None = Field(default=None, max_length=MAX_SAMPLES)
    kernel_samples_ms: list[float] | None = Field(default=None, max_length=MAX_SAMPLES)
    before_kernel_samples_ms: list[float] | None = Field(default=None, max_length=MAX_SAMPLES)
    kernel_rounds: Rounds | None = None
    before_rounds: Rounds | None = None
    change: Change | None = None
    # Where each round also measured the kernel's host time per call (a worker per tree): the
    # merge base's median, both sides' per-round host times and their change, which the report
    # judges beside the device's for a host-bound row.
    before_kernel_host_us: float | None = None
    kernel_host_samples_us: list[float] | None = Field(default=None, max_length=MAX_SAMPLES)
    before_kernel_host_samples_us: list[float] | None = Field(default=None, max_length=MAX_SAMPLES)
    host_change: Change | None = None  # paired by round: one process a side, shown only
    # Where several processes per tree timed the kernel's host time (`compare.host_processes`):
    # each process's median host time per call (µs; the worker's first), and the change over
    # processes (its `rounds`: the processes of the side with fewer), which the report judges
    # for a host-bound row. An older runner sends none.
    kernel_host_process_us: list[float] | None = Field(default=None, max_length=MAX_PROCESSES)
    before_kernel_host_process_us: list[float] | None = Field(
        default=None, max_length=MAX_PROCESSES
    )
    host_process_change: Change | None = None


class BenchmarkResult(_Model):
    op: str
    rows: list[BenchmarkRow] = Field(default_factory=list)
    arithmetic_mean_speedup: float | None = None
    geometric_mean_speedup: float | None = None
    before_arithmetic_mean_speedup: float | None = None
    # Over the rounds of a comparison: the geometric-mean speedup of each side, per round,
    # summarised (median and 95 % interval); None without rounds.
    geometric_mean_rounds: Rounds | None = None
    before_geometric_mean_rounds: Rounds | None = None
    compare_mode: str | None = Field(
        default=None,
        description="how before and after were timed: in_process, processes (a process per "
        "tree per round) or workers (a process per tree kept across rounds)",
    )
    merge_base: str | None = Field(default=None, description="the commit the before side ran")
    device: str | None = None
    performance: bool = Field(
        default=True, description="False when timed under the Triton interpreter: not performance"
    )

    @staticmethod
    def means(speedups: list[float]) -> tuple[float | None, float | None]:
        """Arithmetic and geometric mean of positive speedups (None, None when empty)."""
        vals = [s for s in speedups if s > 0 and math.isfinite(s)]
        if not vals:
            return None, None
        return sum(vals) / len(vals), math.exp(sum(math.log(v) for v in vals) / len(vals))


# Fields an older runner sent for a vendor's package, now named in `EnvironmentInfo.packages`.
LEGACY_PACKAGES = ("torch_musa",)
MAX_PACKAGES = 16
_PACKAGE_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,62}[A-Za-z0-9])?$")


class SlotInfo(_Model):
    """The runner's slot that ran a job: its index, the device it was given (its
    visible-devices variable's value) and the CPU cores its steps were pinned to (`0-3`; None:
    unpinned)."""

    index: int = Field(ge=0, le=4095)
    device: str | None = Field(default=None, max_length=100)
    cores: str | None = Field(default=None, max_length=300)


class EnvironmentInfo(_Model):
    """What the job ran on: the device, torch and triton, and the vendor's own packages
    (the workflow's `device.packages`) by name."""

    device_name: str | None = None
    vendor: str | None = None
    driver: str | None = None
    torch: str | None = None
    triton: str | None = None
    packages: dict[str, str] = Field(
        default_factory=dict,
        description="the vendor's packages beside torch and triton, name to version, in the "
        "workflow's order (`torch_musa` → `1.3.0`)",
    )
    python: str | None = None
    runner_name: str | None = None
    runner_version: str | None = None
    slot: SlotInfo | None = Field(default=None, description="where on the runner it ran")
    notes: list[str] = Field(
        default_factory=list,
        description="host packages used where the repository pins other versions",
    )

    @model_validator(mode="before")
    @classmethod
    def _legacy_fields(cls, data: Any) -> Any:
        """An older runner's `torch_musa` field is that package in `packages`."""
        if not isinstance(data, dict) or not any(key in data for key in LEGACY_PACKAGES):
            return data
        data = dict(data)
        packages = data.get("packages")
        if packages is not None and not isinstance(packages, dict):
            return data  # left as it came: validation says what is wrong
        merged = dict(packages or {})
        for key in LEGACY_PACKAGES:
            value = data.pop(key, None)
            if value is not None:
                merged.setdefault(key, value)
        data["packages"] = merged
        return data

    @field_validator("packages")
    @classmethod
    def _package_names(cls, packages: dict[str, str]) -> dict[str, str]:
        """A runner's word, shown in a comment: names of letters, digits and `._-` (others are
        left out), versions of 100 characters at most, 16 packages at most."""
        kept = {k: v[:100] for k, v in packages.items() if _PACKAGE_NAME.match(k)}
        return dict(list(kept.items())[:MAX_PACKAGES])


MAX_PROGRESS_FAILURES = 20
MAX_PROGRESS_TESTS = 10_000_000


class Progress(_Model):
    """A running job's progress as its runner streams it (`POST /api/v1/jobs/{id}/progress`):
    the current step and, in a pytest step, tests done of the total with the ids of the first
    failures. Everything here came from the pull request's process: bounded."""

    step: str | None = Field(default=None, max_length=100)
    tests_done: int = Field(default=0, ge=0, le=MAX_PROGRESS_TESTS)
    tests_total: int | None = Field(default=None, ge=0, le=MAX_PROGRESS_TESTS)
    failed: int = Field(default=0, ge=0, le=MAX_PROGRESS_TESTS)
    failures: list[str] = Field(default_factory=list, max_length=MAX_PROGRESS_FAILURES)

    @field_validator("failures")
    @classmethod
    def _short_ids(cls, ids: list[str]) -> list[str]:
        return [i[:300] for i in ids]


class FailureClass(StrEnum):
    """What a failing test's re-runs say of it (`runner/results/failures.py` decides)."""

    new = "new"  # fails on the head's re-runs, passes on the merge base
    flaky = "flaky"  # passed on a re-run on the head
    already_failing = "already_failing"  # fails on the head's re-runs and on the merge base
    infrastructure = "infrastructure"  # the job, not the test: its re-runs gave no verdict
    unclassified = "unclassified"  # not re-run (the budget), or with no merge base to ask


class ClassifiedFailure(_Model):
    """One failing test's class and why, from its re-runs by node id."""

    test_id: str = Field(max_length=1000)
    failure_class: FailureClass
    why: str = Field(max_length=500)
    reruns: int = Field(default=0, ge=0, description="re-runs on the head that gave a verdict")
    rerun_failures: int = Field(default=0, ge=0)


class FailureClasses(_Model):
    """The accuracy step's failures told apart (`JobResult.failures`): re-run on the head and
    on the merge base within the repository's budget (`failures:` in its settings file, read at
    the base), and which classes fail the job's gate there. An older runner sends none; the
    report then judges the failures as it always did."""

    step: str = Field(default="accuracy", max_length=100, description="the step classified")
    gate: list[FailureClass] = Field(
        default_factory=lambda: [FailureClass.new], max_length=len(FailureClass)
    )
    tests: list[ClassifiedFailure] = Field(default_factory=list, max_length=1000)
    merge_base: str | None = Field(default=None, description="the commit re-run as the base")
    infrastructure: str | None = Field(
        default=None,
        max_length=500,
        description="why the step itself gave no verdict (crashed, timed out): the job, not a test",
    )
    duration_s: float = 0.0


MAX_PROFILE_ROWS = 3
MAX_PROFILE_KERNELS = 20


class KernelTime(_Model):
    """One kernel (on a device without one, one op) of a profiled row: its time per call of
    the row's function on each side (µs) and how often it ran per call; None where that side
    did not run it."""

    name: str = Field(max_length=300)
    before_us: float | None = None
    after_us: float | None = None
    before_calls: float | None = None
    after_calls: float | None = None


class ProfiledRow(_Model):
    """One row timed under the workflow's profiler on the merge base and the pull request:
    its kernels and the host time per call around them; `traces` names the uploaded traces
    (the job's artifacts) of each side."""

    dtype: str = Field(max_length=100)
    size: list[int] = Field(default_factory=list, max_length=16)
    ratio: float | None = Field(default=None, description="the comparison's change, after/before")
    before_host_us: float | None = None
    after_host_us: float | None = None
    kernels: list[KernelTime] = Field(default_factory=list, max_length=MAX_PROFILE_KERNELS)
    traces: list[str] = Field(default_factory=list, max_length=2)


class ProfileResult(_Model):
    """`/test profile`'s answer: the rows that changed most (else the slowest), each profiled
    on both sides. Shown under the table, never part of the verdict."""

    profiler: str = Field(default="", max_length=100, description="the activities recorded")
    rows: list[ProfiledRow] = Field(default_factory=list, max_length=MAX_PROFILE_ROWS)
    message: str | None = Field(default=None, max_length=500, description="why none, if none")


class JobResult(_Model):
    """What a runner uploads on completion. `status` is one of the final job states a runner
    may report: succeeded, failed, errored, cancelled, timed_out."""

    status: JobStatus
    sha: str
    environment: EnvironmentInfo = Field(default_factory=EnvironmentInfo)
    steps: list[StepResult] = Field(default_factory=list)
    accuracy: AccuracyResult | None = None
    benchmark: BenchmarkResult | None = None
    error_step: str | None = Field(default=None, description="for errored: the step that failed")
    error_message: str | None = None
    unknown_op: bool = Field(default=False, description="no test is marked with the operator")
    close_matches: list[str] = Field(default_factory=list)
    operators: list[str] = Field(
        default_factory=list,
        max_length=5000,
        description="the operators the checkout's tests know (markers), when the runner could tell",
    )
    failures: FailureClasses | None = Field(
        default=None, description="the accuracy step's failures classified by their re-runs"
    )
    profile: ProfileResult | None = Field(
        default=None, description="`/test profile`: the changed rows' kernels, both sides"
    )
    started_at: datetime | None = None
    finished_at: datetime | None = None

    @property
    def duration_s(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None
