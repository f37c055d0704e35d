"""Before → after in workers: one benchmark process per tree, kept alive, timing round after
round when asked. A foreign harness's process costs tens of seconds before its first row
(imports, collection) and lands in a different state each time (each row moved severalfold
between processes), so a process per round buys few rounds of noise; a worker per tree pays
the start once, and its rounds are as cheap as the benchmark itself.

The worker is the step's own argv with `runner/plugins/pytest_bench_rounds.py` loaded. The
runner and the worker speak through files (the job runs as another user in its own
namespaces: no sockets): the runner writes `round-<n>.request` (or `stop`) into a directory
of its own that the job can only read, and the worker answers `round-<n>.json` into one the
job writes, both under the job's directory. Answers and the harness's records are hostile
input: read without following links, sizes capped, the schema checked.

A round's rows are the harness's records written since the last round, paired in order with
the plugin timer's readings: two per row (the reference, then the kernel), which give each
row's host time per call. A tree's further host processes (`compare.host_processes`) run the
same step beside its worker; their rounds give only the kernel's host times, in the rows'
order (`Worker.host_round`), and no round is asked of the worker until they have collected
(`wait_ready`), since their harness opens the same record files.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from runner.job import layouts
from runner.job.steps import StepOutcome, StepProcess, start_step
from runner.results.results import read_artifact
from workflows.models import BenchmarkResult

ENV_REQUESTS, ENV_ANSWERS = "BENCH_ROUNDS_DIR", "BENCH_ROUNDS_OUT"
PLUGIN = "pytest_bench_rounds"
MAX_ANSWER_BYTES = 2 * 1024 * 1024
MAX_TIMINGS = 20_000
MAX_RECORD_BYTES = 16 * 1024 * 1024  # a round's new records, at most
POLL_S = 0.01
READINGS_PER_ROW = 2  # the reference's, then the kernel's


class AnswerError(ValueError):
    """A worker's answer that cannot be used."""


_Reading = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class Timing(BaseModel):
    """One reading of the worker's timer (ms per call)."""

    model_config = ConfigDict(frozen=True, strict=True)

    host_ms: _Reading
    device_ms: _Reading


class Answer(BaseModel):
    """One round's answer, checked (what else the worker wrote is ignored)."""

    model_config = ConfigDict(frozen=True, strict=True)

    round: int
    pid: Annotated[int, Field(gt=0)]
    failed: bool
    timings: Annotated[tuple[Timing, ...], Field(max_length=MAX_TIMINGS)]


def parse_answer(text: str, number: int) -> Answer:
    """A worker's answer to round `number`; AnswerError, saying what is wrong, for anything
    else."""
    try:
        answer = Answer.model_validate_json(text)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the answer"
        raise AnswerError(f"{where}: {first['msg']}") from None
    if answer.round != number:
        raise AnswerError(f"not the answer to round {number}")
    return answer


def read_answer(path: Path, number: int) -> Answer:
    """Read and check an answer file (a regular file at its own name, capped)."""
    try:
        text = read_artifact(path, limit=MAX_ANSWER_BYTES)
    except OSError as exc:
        raise AnswerError(f"unreadable: {exc.strerror or exc}") from exc
    return parse_answer(text, number)


def _read_from(path: Path, offset: int, limit: int) -> bytes:
    """The bytes of a regular file past `offset`, at most `limit` (no link followed)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        handle.seek(offset)
        return handle.read(limit)


def with_host_times(
    bench: BenchmarkResult, timings: Sequence[Timing], log: Callable[[str], None], where: str
) -> BenchmarkResult:
    """Each row's host time per call from the round's readings, two per row in row order (the
    reference, then the kernel); the rows unchanged, with a log line, when the counts differ."""
    if len(timings) != READINGS_PER_ROW * len(bench.rows):
        log(
            f"{where}: {len(timings)} timings for {len(bench.rows)} rows (not "
            f"{READINGS_PER_ROW} a row): rows kept without host times"
        )
        return bench
    rows = [
        row.model_copy(
            update={
                "reference_host_us": timings[2 * i].host_ms * 1000,
                "kernel_host_us": timings[2 * i + 1].host_ms * 1000,
            }
        )
        for i, row in enumerate(bench.rows)
    ]
    return bench.model_copy(update={"rows": rows})


@dataclass
class Worker:
    """One tree's benchmark process and its two directories."""

    name: str  # "after" or "base": the log's and the directories' name
    tree: Path
    records: str  # the harness's record files, a glob in the tree
    op: str
    requests: Path
    answers: Path
    log: Callable[[str], None]
    first_timeout_s: float = 1800.0  # the first answer's wait: start, imports, collection
    process: StepProcess | None = None
    outcome: StepOutcome | None = None  # once it ended
    rounds: int = 0
    longest_s: float = 0.0  # the longest round after the first
    pids: set[int] = field(default_factory=set)
    offsets: dict[str, int] = field(default_factory=dict)
    failure: str = ""  # why it gave no round, last

    def start(
        self,
        argv: Sequence[str],
        env: Mapping[str, str],
        on_output: Callable[[bytes], None],
        on_start: Callable[[int], None] | None = None,
    ) -> bool:
        started = start_step(argv, cwd=self.tree, env=env, on_output=on_output, on_start=on_start)
        if isinstance(started, StepOutcome):
            self.outcome, self.failure = started, started.start_error or "did not start"
            return False
        self.process = started
        return True

    def ask(self, cancel: threading.Event) -> Answer | None:
        """Request the next round and wait for its answer; None (and `failure` says why)
        when the worker ends, does not answer in time (`round_timeout`), fails the round,
        answers what cannot be read, or the job is cancelled."""
        if self.process is None:
            return None
        number = self.rounds + 1
        timeout_s = round_timeout(self.first_timeout_s, self.longest_s, self.rounds)
        _write_request(self.requests, f"round-{number}.request")
        answer_path = self.answers / f"round-{number}.json"
        asked = time.monotonic()
        deadline = asked + timeout_s
        while True:
            if os.path.lexists(answer_path):
                break
            if cancel.is_set():
                self.failure = "cancelled"
                return None
            if not self.process.running():
                self.failure = f"its process ended (exit {self.process.proc.returncode})"
                return None
            if time.monotonic() >= deadline:
                self.failure = f"no answer to round {number} within {timeout_s:g} s"
                return None
            time.sleep(POLL_S)
        try:
            answer = read_answer(answer_path, number)
        except AnswerError as exc:
            self.failure = f"round {number}'s answer refused: {exc}"
            return None
        if answer.failed:
            self.failure = f"a test failed in round {number}"
            return None
        if number > 1:
            self.longest_s = max(self.longest_s, time.monotonic() - asked)
        self.rounds = number
        self.pids.add(answer.pid)
        return answer

    def ready(self) -> bool:
        """Whether the worker has collected its tests (and so opened whatever its harness
        opens at start), by its `ready.json`; a worker that ended counts as ready: it will
        open nothing more."""
        return (
            self.process is None
            or not self.process.running()
            or os.path.lexists(self.answers / "ready.json")
        )

    def host_round(self, cancel: threading.Event, rows: int) -> list[float] | None:
        """One round of a further host process: each of the tree's `rows` kernel host times
        per call (µs), from the timer's readings alone, in row order (the same harness in the
        same tree gives its rows in the same order as the tree's worker, whose records name
        them); None (`failure` says why) where the round failed or its readings are not two
        a row. Its harness's records are not read: they are the worker's."""
        answer = self.ask(cancel)
        if answer is None:
            return None
        if len(answer.timings) != READINGS_PER_ROW * rows:
            self.failure = (
                f"round {answer.round}: {len(answer.timings)} timings for {rows} rows (not "
                f"{READINGS_PER_ROW} a row)"
            )
            return None
        return [answer.timings[READINGS_PER_ROW * i + 1].host_ms * 1000 for i in range(rows)]

    def new_rows(self) -> BenchmarkResult:
        """The rows of the records the harness wrote since the last call (whole lines only)."""
        lines: list[str] = []
        budget = MAX_RECORD_BYTES
        for path in sorted(self.tree.glob(self.records)):
            key = str(path)
            offset = self.offsets.get(key, 0)
            try:
                if path.lstat().st_size < offset:  # written anew: read it from the start
                    offset = 0
                data = _read_from(path, offset, budget)
            except OSError:
                continue
            whole = data[: data.rfind(b"\n") + 1]
            self.offsets[key] = offset + len(whole)
            budget -= len(whole)
            lines += whole.decode("utf-8", "replace").splitlines()
        return layouts.parse_flaggems_records(lines, self.op)

    def round(self, cancel: threading.Event) -> BenchmarkResult | None:
        """One round's rows with their host times, or None (`failure` says why)."""
        answer = self.ask(cancel)
        if answer is None:
            return None
        bench = self.new_rows()
        if not bench.rows:
            self.failure = f"round {answer.round} wrote no record of {self.op}"
            return None
        return with_host_times(bench, answer.timings, self.log, f"{self.name} round {answer.round}")

    def stop(self, grace_s: float) -> StepOutcome | None:
        """Ask it to stop, give it `grace_s` to end by itself, then end its process group."""
        if self.process is None:
            return self.outcome
        _write_request(self.requests, "stop")
        deadline = time.monotonic() + grace_s
        while self.process.running() and time.monotonic() < deadline:
            time.sleep(POLL_S)
        if self.process.running():
            self.process.kill(grace_s)
        self.outcome = self.process.finish()
        self.process = None
        return self.outcome


def _write_request(directory: Path, name: str) -> None:
    """A request, atomically, in the runner's own directory (the job can only read it)."""
    tmp = directory / f".{name}.tmp"
    tmp.write_text(name)
    os.replace(tmp, directory / name)


def prepare(job_dir: Path, artifacts: Path, name: str) -> tuple[Path, Path]:
    """A worker's request directory (the runner's, readable by all) and answer directory
    (under the artifacts, which the job user may write): both new and empty."""
    requests = job_dir / "bench-rounds" / name
    answers = artifacts / f"bench-rounds-{name}"
    for path in (requests, answers):
        path.mkdir(parents=True, exist_ok=False)
    requests.chmod(0o755)
    requests.parent.chmod(0o755)
    return requests, answers


HOST_POLL_S = 0.05  # how often a further host process looks for a request: it waits long


def worker_env(
    env: Mapping[str, str],
    plugins: Path,
    requests: Path,
    answers: Path,
    idle_s: float,
    poll_s: float | None = None,
) -> dict[str, str]:
    """`env` with the rounds plugin loaded from `plugins` and told its directories (and how
    often to look for a request, where not the plugin's default)."""
    polled = {"BENCH_ROUNDS_POLL_S": f"{poll_s:g}"} if poll_s else {}
    return {
        **polled,
        **env,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(plugins), env.get("PYTHONPATH")])),
        "PYTEST_ADDOPTS": " ".join(filter(None, [env.get("PYTEST_ADDOPTS"), f"-p {PLUGIN}"])),
        ENV_REQUESTS: str(requests),
        ENV_ANSWERS: str(answers),
        "BENCH_ROUNDS_IDLE_S": f"{idle_s:g}",
    }


def wait_ready(
    workers: Sequence[Worker], cancel: threading.Event, timeout_s: float, poll_s: float = POLL_S
) -> list[Worker]:
    """Wait until every worker is ready (`Worker.ready`), at most `timeout_s`; those that are
    not by then. A tree's further host processes run its harness too, which may open (and
    truncate) the records its worker's rounds append to: no round is asked of the worker
    before they have."""
    deadline = time.monotonic() + timeout_s
    waiting = [w for w in workers if not w.ready()]
    while waiting and not cancel.is_set() and time.monotonic() < deadline:
        time.sleep(poll_s)
        waiting = [w for w in waiting if not w.ready()]
    return waiting


def round_timeout(first_s: float, longest_s: float, rounds: int) -> float:
    """How long to wait for an answer: a round's first (the process's start, imports and
    collection) gets the step's timeout; later ones ten times the longest so far, a minute at
    least, never more than the first's."""
    if rounds == 0:
        return first_s
    return min(first_s, max(60.0, 10 * longest_s))
