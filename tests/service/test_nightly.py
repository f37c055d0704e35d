"""The nightly schedule against the sandbox and the real service: a push to the default branch
registers it (from the next night on); a night runs every operator once, compared with the
head's parent where nothing ran before and with the last night's commit after; the same night
again, or again after a restart, runs nothing more; a crash between claiming a night and making
its jobs is settled by the next round; after several nights down only the latest runs; a head
already measured runs nothing."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from sandbox.app import create_app as create_sandbox
from sandbox.client import SandboxAdmin
from service.db.models import Job, MainRun, MainSchedule
from service.receive.nightly import Nightly
from tests.e2e.mainrepo import BASE_COST_US, branch_with, make_main_repo
from tests.service.helpers import LiveService, live_service, service_settings, sqlite_at_head
from tests.support.git import git
from tests.support.live import live_server

REPO = "acme/mainops"
BOT = "ondemand-bot"
NIGHTLY = """\
main:
  nightly: all
  backends: [cpu]
"""


@dataclass
class World:
    admin: SandboxAdmin
    svc: LiveService
    repo: Path
    hour: int

    def merge(self, branch: str, cost: int) -> str:
        branch_with(self.repo, branch, {"gelu": (cost, "")})
        number = int(self.admin.open_pull(REPO, head=branch, user="alice")["number"])
        return str(self.admin.merge_pull(REPO, number, user="alice")["sha"])

    def jobs(self) -> list[Job]:
        with self.svc.service.db.reads() as session:
            return list(session.scalars(select(Job).order_by(Job.id)))

    def schedule(self) -> MainSchedule | None:
        with self.svc.service.db.reads() as session:
            return session.scalars(select(MainSchedule)).first()

    def nights(self) -> list[str]:
        with self.svc.service.db.reads() as session:
            runs = session.scalars(select(MainRun).where(MainRun.trigger == "nightly"))
            return sorted(r.key for r in runs)

    def night(self, clock: list[datetime]) -> Nightly:
        """A nightly worker of this service's parts (a restart: a new one) on a clock of the
        test's; the service's own worker keeps the real one, whose night is already done."""
        own = self.svc.service.nightly
        return Nightly(own.services, own.runs, threading.Event(), clock=lambda: clock[0])


@contextmanager
def world_of(tmp_path: Path) -> Iterator[World]:
    repo = tmp_path / "mainops"
    make_main_repo(repo)
    (repo / ".github" / "ondemand.yml").write_text(NIGHTLY)
    git(repo, "commit", "-q", "-am", "nightly")
    hour = (datetime.now(UTC).hour + 12) % 24  # the service's own worker: hours from due
    with live_server(create_sandbox()) as gh_url, SandboxAdmin(gh_url) as admin:
        admin.create_user("acme", "Organization")
        admin.create_user("alice")
        admin.create_user(BOT, "Bot")
        token = admin.create_token(BOT)
        admin.create_repo("acme", "mainops", str(repo))
        admin.set_permission(REPO, "alice", "write")
        settings = service_settings(
            sqlite_at_head(tmp_path / "nightly.db"), github_api_url=gh_url, github_token=token,
            bot_login=BOT, nightly_hour_utc=hour, changes_dir=tmp_path / "changes",
        )  # fmt: skip
        with live_service(settings) as svc:
            admin.set_webhook(f"{svc.url}/webhook", "new-secret")
            yield World(admin, svc, repo, hour)


def _wait(check: object, timeout: float = 15) -> None:
    deadline = datetime.now(UTC) + timedelta(seconds=timeout)
    while not check():  # type: ignore[operator]
        assert datetime.now(UTC) < deadline, f"timed out waiting for {check}"
        threading.Event().wait(0.05)


def test_each_night_runs_once_through_restarts_crashes_and_nights_missed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with world_of(tmp_path) as world:
        first = world.merge("first", BASE_COST_US + 10)
        _wait(lambda: world.schedule() is not None)
        schedule = world.schedule()
        assert schedule is not None and (schedule.repo, schedule.nightly) == (REPO, "all")
        assert schedule.last_night is not None  # tonight counts as done: from the next
        assert world.jobs() == []  # on_push none: the push itself runs nothing

        clock = [datetime(2099, 1, 1, world.hour, 30, tzinfo=UTC)]
        night = world.night(clock)
        night.run_once()
        jobs = world.jobs()
        assert sorted((j.op, j.trigger, j.pr_number, j.sha) for j in jobs) == [
            ("drift", "nightly", 0, first), ("gelu", "nightly", 0, first),
        ]  # fmt: skip
        parent = git(world.repo, "rev-parse", f"{first}^1")
        assert {(j.base_sha, j.exact_base) for j in jobs} == {(parent, True)}
        night.run_once()
        world.night(clock).run_once()  # a restart: the same night is done
        assert len(world.jobs()) == 2 and world.nights() == ["nightly:2099-01-01"]

        second = world.merge("second", BASE_COST_US + 20)
        clock[0] += timedelta(days=1)
        runs = world.svc.service.nightly.runs
        settle = runs.settle

        def crash(*_args: object) -> str:
            raise RuntimeError("the replica died after claiming the night")

        monkeypatch.setattr(runs, "settle", crash)
        with pytest.raises(RuntimeError):
            world.night(clock).run_once()
        monkeypatch.setattr(runs, "settle", settle)
        assert len(world.jobs()) == 2  # claimed, its run made, no job yet
        clock[0] += timedelta(minutes=1)
        world.night(clock).run_once()  # the next round settles what the crash left
        world.night(clock).run_once()
        later = [j for j in world.jobs() if j.sha == second]
        assert sorted(j.op for j in later) == ["drift", "gelu"]
        assert {j.base_sha for j in later} == {first}  # the last night's commit
        assert world.nights() == ["nightly:2099-01-01", "nightly:2099-01-02"]

        clock[0] += timedelta(days=3)  # three nights down: the latest runs, once
        world.night(clock).run_once()
        assert world.nights()[-1] == "nightly:2099-01-05" and len(world.nights()) == 3
        assert len(world.jobs()) == 4  # the head was measured: nothing changed since


def test_a_merge_that_breaks_the_settings_is_told_and_runs_nothing(tmp_path: Path) -> None:
    """The merged pull request is told each problem of the settings file on its line (the
    reply every command gets for a malformed file), once, and the default branch runs
    nothing."""
    with world_of(tmp_path) as world:
        work = tmp_path / "work-bad"
        git(world.repo, "worktree", "add", "-q", "-b", "bad", str(work), "main")
        (work / ".github" / "ondemand.yml").write_text(
            "main:\n  on_push: sometimes\n  backends: [cpu]\n"
        )
        git(work, "commit", "-q", "-am", "settings")
        git(world.repo, "worktree", "remove", "--force", str(work))
        number = int(world.admin.open_pull(REPO, head="bad", user="alice")["number"])
        world.admin.merge_pull(REPO, number, user="alice")
        reply = world.admin.wait_for_comment(REPO, number, user=BOT, contains="problem")
        assert (
            'line 2: main.on\\_push: "sometimes" is not a choice: give none, changed or all'
            in (reply["body"])
        )
        assert len([c for c in world.admin.comments(REPO, number) if c["user"] == BOT]) == 1
        assert world.jobs() == []
