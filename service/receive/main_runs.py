"""The default branch's own runs (a push to it, or a night): the run's row, made once per
repository and key (`push:<sha>`, `nightly:<date>`), then its jobs, one per operator and
backend, with no pull request (`pr_number` NO_PULL), each compared with exactly the last
default-branch commit that ran that operator on that backend (found by walking the runs back
through the commits before them), or with the run's parent commit where none did. A run
processed again (a redelivery, a crash before it settled) creates only the jobs it lacks. The
nightly schedule's row is kept here too, from what each push's settings say."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from ondemand.git import GitError
from service.db.engine import utcnow
from service.db.models import MAIN_TRIGGERS, NO_PULL, Job, MainRun, MainSchedule
from service.queue.jobs import NewJob
from service.receive.context import Services
from workflows.repo_config import ConfigReading

log = logging.getLogger(__name__)
ZERO_SHA = "0" * 40
RAN = ("queued", "running", "succeeded", "failed")  # a job that ran its operator, or will
WALKED_RUNS = 2000  # the newest runs a walk back may go through


def due_night(now: datetime, hour_utc: int) -> str:
    """The latest night whose run is due at `now`: today's once its hour (UTC) has passed,
    else yesterday's (`YYYY-MM-DD`)."""
    moment = now.astimezone(UTC)
    day = moment.date() if moment.hour >= hour_utc else moment.date() - timedelta(days=1)
    return day.isoformat()


@dataclass(frozen=True)
class MainRequest:
    """A run of the default branch to begin: what started it and what its settings said."""

    repo: str
    clone_url: str
    private: bool
    default_branch: str
    trigger: str  # push, nightly
    key: str
    sha: str
    before: str | None
    pull_number: int | None
    pusher: str | None
    alerts: tuple[str, ...]
    drift_window: int


@dataclass(frozen=True)
class _Walk:
    """The default branch's runs as the walk back reads them: which runs are at a commit, the
    commit before each run, and which (run, operator, backend) ran."""

    at: dict[str, list[int]]
    before: dict[int, str | None]
    ran: set[tuple[int, str, str]]
    mine: set[tuple[str, str]]  # the (operator, backend) jobs this run has, in any state


class MainRuns:
    """Begins and settles the default branch's runs, and keeps the nightly schedule."""

    def __init__(self, services: Services, nightly_hour_utc: int = 2) -> None:
        self.services = services
        self.nightly_hour_utc = nightly_hour_utc

    def begin(self, request: MainRequest) -> int:
        """The run's id: made now, or the one made for the same key before."""
        db = self.services.db
        query = select(MainRun.id).where(MainRun.repo == request.repo, MainRun.key == request.key)
        with db.writes() as session, session.begin():
            existing = session.scalars(query).first()
            if existing is not None:
                return existing
            try:
                with session.begin_nested():
                    run = MainRun(
                        repo=request.repo, key=request.key, trigger=request.trigger,
                        sha=request.sha, before_sha=request.before,
                        pull_number=request.pull_number, pusher=request.pusher,
                        clone_url=request.clone_url, private=request.private,
                        default_branch=request.default_branch, alerts=list(request.alerts),
                        drift_window=request.drift_window, created_at=utcnow(),
                    )  # fmt: skip
                    session.add(run)
                    session.flush()
                    return run.id
            except IntegrityError:
                pass
        with db.reads() as session:
            found = session.scalars(query).first()
        assert found is not None
        return found

    def settle(
        self, run_id: int, scope: str, backends: Sequence[str], settings: ConfigReading
    ) -> str:
        """Create the run's jobs: the operators its push changed (`scope` changed) or every
        operator (all), on `backends`; what it did. A run already settled says so again."""
        services = self.services
        with services.db.reads() as session:
            run = session.get(MainRun, run_id)
            assert run is not None
            session.expunge(run)
        if run.settled_at is not None:
            return run.outcome or "settled"
        try:
            by_backend = self._operators(run, scope, backends, settings)
        except GitError as exc:
            log.warning("selection of %s at %s failed: %s", run.repo, run.sha[:12], exc)
            return self._settled(run_id, f"selection failed: {exc}")
        walk = self._walk(run)
        made = existing = skipped = 0
        for backend, ops in by_backend.items():
            for op in ops:
                if (op, backend) in walk.mine:
                    existing += 1
                    continue
                base = self._base(walk, run, op, backend)
                if base is None or base == run.sha:
                    skipped += 1  # nothing to compare with, or measured at this commit
                    continue
                policy = settings.config.for_op(op)
                _, new = services.jobs.create_job(
                    NewJob(
                        repo=run.repo, clone_url=run.clone_url, pr_number=NO_PULL, sha=run.sha,
                        op=op, backend=backend, exact_base=True, base_ref=run.default_branch,
                        base_sha=base, requested_by=run.pusher or run.trigger,
                        private=run.private, threshold=policy.threshold, gate=policy.gate,
                        trigger=run.trigger, main_run_id=run.id,
                    )
                )  # fmt: skip
                made += new
                existing += not new
        outcome = f"{run.trigger} {run.sha[:7]}: {made} job(s) queued"
        if existing or skipped:
            outcome += f", {existing} already there, {skipped} with nothing to compare"
        return self._settled(run_id, outcome)

    def _operators(
        self, run: MainRun, scope: str, backends: Sequence[str], settings: ConfigReading
    ) -> dict[str, list[str]]:
        """The operators each backend runs: a push's changes, or every one of the tree."""
        selector = self.services.selector
        if selector is None or not backends:
            return {}
        if scope == "changed":
            if not run.before_sha or run.before_sha == ZERO_SHA:
                return {}  # the branch was created: nothing before it to compare with
            rules = settings.config.changes.selection_rules()
            report = selector.select_push(
                run.repo, run.clone_url, run.private, run.before_sha, run.sha, backends, rules
            )
        else:
            report = selector.select_all(run.repo, run.clone_url, run.private, run.sha, backends)
        return {b: sorted(report.by_backend.get(b, ())) for b in backends}

    def _walk(self, run: MainRun) -> _Walk:
        """The newest runs of the repository but this one, and what each ran."""
        with self.services.db.reads() as session:
            runs = session.execute(
                select(MainRun.id, MainRun.sha, MainRun.before_sha)
                .where(MainRun.repo == run.repo)
                .order_by(MainRun.id.desc())
                .limit(WALKED_RUNS)
            ).all()
            jobs = session.execute(
                select(Job.main_run_id, Job.op, Job.backend).where(
                    Job.repo == run.repo,
                    Job.trigger.in_(MAIN_TRIGGERS),
                    Job.status.in_(RAN),
                    Job.main_run_id.is_not(None),
                )
            ).all()
            mine = session.execute(
                select(Job.op, Job.backend).where(Job.main_run_id == run.id)
            ).all()
        at: dict[str, list[int]] = {}
        before: dict[int, str | None] = {}
        for run_id, sha, before_sha in runs:
            before[run_id] = before_sha
            if run_id != run.id:
                at.setdefault(sha, []).append(run_id)
        ran = {(r, op, b) for r, op, b in jobs if r is not None}
        return _Walk(at, before, ran, {(op, b) for op, b in mine})

    def _base(self, walk: _Walk, run: MainRun, op: str, backend: str) -> str | None:
        """The last default-branch commit that ran `op` on `backend`, walking back from the
        run's commit through the commits before each run; else the run's parent."""
        commit: str | None = run.sha
        seen: set[str] = set()
        while commit and commit not in seen and commit != ZERO_SHA:
            seen.add(commit)
            here = walk.at.get(commit, [])
            if any((r, op, backend) in walk.ran for r in here):
                return commit
            befores = [run.before_sha] if commit == run.sha else []
            befores += [walk.before.get(r) for r in here]
            commit = next((b for b in befores if b), None)
        parent = run.before_sha
        return parent if parent and parent != ZERO_SHA else None

    def _settled(self, run_id: int, outcome: str) -> str:
        with self.services.db.writes() as session, session.begin():
            run = session.get(MainRun, run_id)
            if run is not None and run.settled_at is None:
                run.settled_at, run.outcome = utcnow(), outcome[:1000]
        return outcome

    def remember_schedule(
        self, repo: str, clone_url: str, private: bool, branch: str, nightly: str
    ) -> None:
        """Keep the repository's nightly schedule as its default branch's settings say now:
        a repository newly scheduled runs from the next night on (tonight's counts as
        done)."""
        night = due_night(utcnow(), self.nightly_hour_utc)
        with self.services.db.writes() as session, session.begin():
            row = session.scalars(select(MainSchedule).where(MainSchedule.repo == repo)).first()
            if row is None:
                if nightly == "none":
                    return
                try:
                    with session.begin_nested():
                        session.add(MainSchedule(
                            repo=repo, clone_url=clone_url, private=private,
                            default_branch=branch, nightly=nightly, last_night=night,
                            updated_at=utcnow(),
                        ))  # fmt: skip
                except IntegrityError:
                    pass  # another replica's push made it
                return
            if row.nightly == "none" and nightly != "none":
                row.last_night = night  # turned on: from the next night on
            row.nightly, row.clone_url, row.private = nightly, clone_url, private
            row.default_branch, row.updated_at = branch, utcnow()
