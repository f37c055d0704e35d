"""What a soak recorded: what the tool did (commands, pushes, redeliveries, faults), what GitHub
shows afterwards (deliveries and their attempts, comments with their edit history and
reactions, statuses, check runs), the jobs as the database has them, and the runners' job
starts and ends from their logs. Plain frozen dataclasses with a JSON form, so a record can be
written, read back and checked again (`invariants.py`) without any process running.

Times are seconds since the epoch, on this machine's one clock."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Sent:
    """One thing the load generator did as a person on GitHub. `command`: the body holds a
    command the service must answer; `trusted`: its author may start jobs."""

    at: float
    kind: str  # test, fanout, changed, retest, cancel, help, outsider, hostile, malformed, ...
    repo: str
    pr: int
    user: str | None = None
    comment_id: int | None = None
    body: str | None = None
    trusted: bool = False
    command: bool = False
    detail: str = ""


@dataclass(frozen=True)
class Attempt:
    """One HTTP attempt of a delivery: when it ended, its status (None: no answer) and time."""

    at: float
    status: int | None
    ms: int


@dataclass(frozen=True)
class DeliveryRec:
    id: str
    event: str
    action: str | None
    attempts: tuple[Attempt, ...]
    comment_id: int | None = None  # an issue_comment's comment
    repo: str = ""
    pr: int = 0  # a pull_request event's pull request
    head: str = ""  # and its head then


@dataclass(frozen=True)
class CommentRec:
    """A comment as GitHub shows it; `bodies` is every version, oldest first (the last is
    its body now); `reactions` (user, content)."""

    id: int
    repo: str
    pr: int
    user: str
    body: str
    deleted: bool = False
    bodies: tuple[str, ...] = ()
    reactions: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class StatusRec:
    repo: str
    sha: str
    context: str
    state: str
    description: str
    target_url: str | None
    id: int = 0


@dataclass(frozen=True)
class CheckRunRec:
    id: int
    repo: str
    head_sha: str
    name: str
    external_id: str | None
    status: str
    conclusion: str | None
    title: str = ""


@dataclass(frozen=True)
class JobRec:
    """A job as the database has it at the end (read only, for the mapping from what GitHub
    shows to jobs)."""

    id: int
    repo: str
    pr: int
    sha: str
    op: str
    backend: str
    status: str
    attempt: int = 1
    reason: str | None = None
    requested_by: str | None = None
    command_comment_id: int | None = None
    created_at: float = 0.0
    finished_at: float | None = None


@dataclass(frozen=True)
class RunEvent:
    """A runner's log line about a job: `start` (a slot began it), `end` (its steps ended),
    `reported` (the service took its result), `dropped` (no longer held: not reported),
    `handed_back` (it could not run it: `detail` is what the service made of it, queued or
    errored); or about the runner (job 0): `drained` (`detail`: the jobs that drained it,
    comma-separated) and `undrained`."""

    at: float
    runner: str
    job_id: int
    what: str
    detail: str = ""


@dataclass(frozen=True)
class FaultRec:
    kind: str
    target: str
    start: float
    end: float
    detail: str = ""


@dataclass
class Record:
    """Everything one soak recorded."""

    seed: int = 0
    mode: str = "app"  # app: check runs; token: commit statuses
    bot: str = "ondemand[bot]"
    outsiders: tuple[str, ...] = ()
    expected: dict[str, str] = field(default_factory=dict)  # operator → its code's verdict
    sent: list[Sent] = field(default_factory=list)
    redeliveries: list[tuple[float, str]] = field(default_factory=list)  # (at, delivery id)
    deliveries: list[DeliveryRec] = field(default_factory=list)
    comments: list[CommentRec] = field(default_factory=list)
    statuses: list[StatusRec] = field(default_factory=list)
    check_runs: list[CheckRunRec] = field(default_factory=list)
    jobs: list[JobRec] = field(default_factory=list)
    reactions_left_out: list[int] = field(default_factory=list)  # command comments: budget low
    runs: list[RunEvent] = field(default_factory=list)
    faults: list[FaultRec] = field(default_factory=list)
    drain_after: int = 3  # the runners' --drain-after
    server_answers: int = 0  # answers in the replicas' access logs
    server_errors: list[str] = field(default_factory=list)  # of them 5xx, but 503
    deadlocks: list[str] = field(default_factory=list)  # PostgreSQL's log says so

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Record:
        deliveries = [
            DeliveryRec(
                **{
                    **d,
                    "attempts": tuple(Attempt(**a) for a in d.get("attempts", ())),
                }
            )
            for d in data.get("deliveries", ())
        ]
        comments = [
            CommentRec(
                **{
                    **c,
                    "bodies": tuple(c.get("bodies", ())),
                    "reactions": tuple(tuple(r) for r in c.get("reactions", ())),
                }
            )
            for c in data.get("comments", ())
        ]
        return cls(
            seed=data.get("seed", 0),
            mode=data.get("mode", "app"),
            bot=data.get("bot", "ondemand[bot]"),
            outsiders=tuple(data.get("outsiders", ())),
            expected=dict(data.get("expected", {})),
            sent=_many(Sent, data.get("sent")),
            redeliveries=[(float(at), str(i)) for at, i in data.get("redeliveries", ())],
            deliveries=deliveries,
            comments=comments,
            statuses=_many(StatusRec, data.get("statuses")),
            check_runs=_many(CheckRunRec, data.get("check_runs")),
            jobs=_many(JobRec, data.get("jobs")),
            reactions_left_out=[int(i) for i in data.get("reactions_left_out", ())],
            runs=_many(RunEvent, data.get("runs")),
            faults=_many(FaultRec, data.get("faults")),
            drain_after=int(data.get("drain_after", 3)),
            server_answers=int(data.get("server_answers", 0)),
            server_errors=list(data.get("server_errors", ())),
            deadlocks=list(data.get("deadlocks", ())),
        )


def _many(kind: type[T], items: list[dict[str, Any]] | None) -> list[T]:
    names = {f.name for f in fields(kind)}  # type: ignore[arg-type]
    return [kind(**{k: v for k, v in item.items() if k in names}) for item in items or ()]
