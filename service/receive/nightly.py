"""The nightly schedule: once a night, at `ONDEMAND_NIGHTLY_HOUR_UTC`, every repository whose
default branch asks for it (`main.nightly: all`, as its last push's settings said) runs every
operator on its configured backends, each compared with the last default-branch commit that
ran it (an operator measured at the branch's head already is left out: nothing changed).

The schedule's state is in the database, so a restart neither skips nor doubles a night: a
night is claimed by moving its repository's `last_night` forward in the same transaction that
makes the night's run (`nightly:<date>`, unique), and a run left unsettled by a crash is
settled again on the next round. A service down through the hour runs that night when it
comes back; after several nights down, only the latest (the same head would be measured each
time)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import or_, select, update

from service.db.engine import utcnow
from service.db.models import MainRun, MainSchedule
from service.github.client import GitHubError
from service.receive.context import Services
from service.receive.main_runs import MainRequest, MainRuns, due_night
from service.worker import Worker

log = logging.getLogger(__name__)
RETRY_S = 60.0  # a night that could not begin (GitHub unreachable) is tried again this soon
UNSETTLED_AFTER = timedelta(seconds=30)  # a run this old and unsettled was left by a crash


class Nightly(Worker):
    """The background worker of the nightly schedule."""

    name = "nightly"

    def __init__(
        self,
        services: Services,
        runs: MainRuns,
        stopping: threading.Event,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        super().__init__(stopping, services.db.outages)
        self.services = services
        self.runs = runs
        self.clock = clock

    def run_once(self) -> float | None:
        """Begin every night due, settle what a crash left; seconds until the next night."""
        now = self.clock()
        night = due_night(now, self.runs.nightly_hour_utc)
        failed = False
        for schedule_id in self._due(night):
            if self.stopping.is_set():
                break
            try:
                self._night(schedule_id, night)
            except GitHubError as exc:
                failed = True
                log.warning("the night %s of schedule %d waits: %s", night, schedule_id, exc)
        failed |= not self._settle_left(now)
        return RETRY_S if failed else self._until_next(now)

    def _until_next(self, now: datetime) -> float:
        hour = self.runs.nightly_hour_utc
        nxt = now.replace(hour=hour, minute=0, second=0, microsecond=0)
        if nxt <= now:
            nxt += timedelta(days=1)
        return max(1.0, (nxt - now).total_seconds())

    def _due(self, night: str) -> list[int]:
        with self.services.db.reads() as session:
            query = select(MainSchedule.id).where(
                MainSchedule.nightly != "none",
                or_(MainSchedule.last_night.is_(None), MainSchedule.last_night < night),
            )
            return list(session.scalars(query))

    def _night(self, schedule_id: int, night: str) -> None:
        """Read the branch and its settings, then claim the night and make its run in one
        transaction (another replica's claim of it wins), then create its jobs."""
        services = self.services
        with services.db.reads() as session:
            schedule = session.get(MainSchedule, schedule_id)
            assert schedule is not None
            session.expunge(schedule)
        repo, branch = schedule.repo, schedule.default_branch
        sha = services.github.commit_sha(repo, branch)
        if sha is None:
            self._claim(schedule_id, night, None)  # no such branch any more: nothing runs
            return
        settings = services.repo_settings(repo, sha)
        main = settings.config.main
        known = (services.backend_names.get(b) for b in main.backends)
        backends = tuple(dict.fromkeys(b for b in known if b))
        if main.nightly == "none" or not backends:
            self._claim(schedule_id, night, None, nightly=main.nightly)
            return
        request = MainRequest(
            repo=repo, clone_url=schedule.clone_url, private=schedule.private,
            default_branch=branch, trigger="nightly", key=f"nightly:{night}", sha=sha,
            before=services.github.commit_parent(repo, sha), pull_number=None, pusher=None,
            alerts=tuple(main.alerts), drift_window=main.drift_window,
        )  # fmt: skip
        if self._claim(schedule_id, night, request):
            run_id = self.runs.begin(request)
            log.info("night %s of %s: %s", night, repo,
                     self.runs.settle(run_id, "all", backends, settings))  # fmt: skip

    def _claim(
        self, schedule_id: int, night: str, request: MainRequest | None, nightly: str = "all"
    ) -> bool:
        """Move the schedule's last night to `night` if no one has (and make the night's run
        in the same transaction); whether this call claimed it."""
        with self.services.db.writes() as session, session.begin():
            claimed = session.execute(
                update(MainSchedule)
                .where(
                    MainSchedule.id == schedule_id,
                    or_(MainSchedule.last_night.is_(None), MainSchedule.last_night < night),
                )
                .values(last_night=night, nightly=nightly, updated_at=utcnow())
                .execution_options(synchronize_session=False)
            ).rowcount
            if claimed and request is not None:
                session.add(_run_row(request))
        return bool(claimed)

    def _settle_left(self, now: datetime) -> bool:
        """Settle the nightly runs a crash left unsettled; False when one could not be."""
        with self.services.db.reads() as session:
            left = session.scalars(
                select(MainRun).where(
                    MainRun.trigger == "nightly",
                    MainRun.settled_at.is_(None),
                    MainRun.created_at < now - UNSETTLED_AFTER,
                )
            ).all()
            for run in left:
                session.expunge(run)
        ok = True
        for run in left:
            try:
                settings = self.services.repo_settings(run.repo, run.sha)
                main = settings.config.main
                known = (self.services.backend_names.get(b) for b in main.backends)
                backends = tuple(dict.fromkeys(b for b in known if b))
                self.runs.settle(run.id, "all", backends, settings)
            except GitHubError as exc:
                ok = False
                log.warning("the nightly run %d waits: %s", run.id, exc)
        return ok


def _run_row(request: MainRequest) -> MainRun:
    return MainRun(
        repo=request.repo, key=request.key, trigger=request.trigger, sha=request.sha,
        before_sha=request.before, pull_number=None, pusher=None, clone_url=request.clone_url,
        private=request.private, default_branch=request.default_branch,
        alerts=list(request.alerts), drift_window=request.drift_window, created_at=utcnow(),
    )  # fmt: skip
