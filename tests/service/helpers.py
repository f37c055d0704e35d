"""Small builders shared by the service tests."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from service.app import Service, create_app
from service.db.engine import Database
from service.db.migrate import upgrade
from service.github.client import GitHubClient
from service.queue.jobs import JobQueue, NewJob
from service.queue.logs import JobLogs
from service.queue.runners import RunnerRegistry
from service.queue.wakeup import Wakeup
from service.settings import Settings
from tests.support.live import live_server

_TEMPLATE: list[Path] = []  # a SQLite file at the schema's head, made once a process


def sqlite_template() -> Path:
    """A SQLite file migrated to the schema's head, made once a process (an xdist worker)."""
    if not _TEMPLATE:
        directory = Path(tempfile.mkdtemp(prefix="ondemand-at-head-"))
        atexit.register(shutil.rmtree, directory, True)
        db = Database.connect(f"sqlite:///{directory / 'ondemand.db'}")
        try:
            upgrade(db.engine)
        finally:
            db.dispose()
        _TEMPLATE.append(directory / "ondemand.db")
    return _TEMPLATE[0]


def sqlite_at_head(path: Path) -> str:
    """The URL of a SQLite database at `path` that starts at the schema's head: a copy of
    `sqlite_template()`, for the tests that need a database, not its migration (a migration
    from empty rebuilds tables, ~0.1 s of CPU a service; the service's start-up migration
    then finds nothing to do). The migrations are tested from empty in test_store and
    test_startup."""
    shutil.copyfile(sqlite_template(), path)
    return f"sqlite:///{path}"


@dataclass
class Queue:
    """The job queue's repositories over one database, without the rest of the service."""

    db: Database
    jobs: JobQueue
    runners: RunnerRegistry
    logs: JobLogs
    wakeup: Wakeup


def make_queue(url: str, *, lease_seconds: int = 120) -> Queue:
    db = Database.connect(url)
    wakeup = Wakeup()
    return Queue(
        db=db,
        jobs=JobQueue(db, wakeup, lease_seconds=lease_seconds),
        runners=RunnerRegistry(db),
        logs=JobLogs(db),
        wakeup=wakeup,
    )


@contextmanager
def open_queue(url: str, *, lease_seconds: int = 120) -> Iterator[Queue]:
    """A migrated database at `url` and the queue's repositories over it."""
    queue = make_queue(url, lease_seconds=lease_seconds)
    upgrade(queue.db.engine)
    try:
        yield queue
    finally:
        queue.db.dispose()


def new_job(op: str = "add", backend: str = "cpu", sha: str = "a" * 40, pr: int = 1) -> NewJob:
    return NewJob(
        repo="octo/kernels",
        clone_url="/tmp/none.git",
        pr_number=pr,
        sha=sha,
        op=op,
        backend=backend,
    )


@contextmanager
def live_service(settings: Settings, github: GitHubClient | None = None) -> Iterator[LiveService]:
    """The real app under uvicorn on loopback, with its parts for direct checks."""
    app = create_app(settings, github=github)
    with live_server(app) as url:
        yield LiveService(url=url, service=app.state.service)


@dataclass
class LiveService:
    url: str
    service: Service

    def register(self, name: str = "r1", backends: list[str] | None = None) -> tuple[int, str]:
        answer = httpx.post(
            f"{self.url}/api/v1/runners/register",
            json={
                "registration_token": "reg-token",
                "name": name,
                "backends": backends or ["cpu"],
                "version": "test",
            },
        )
        answer.raise_for_status()
        body = answer.json()
        return int(body["runner_id"]), str(body["token"])


def service_settings(db_url: str, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "database_url": db_url,
        "registration_tokens": ["reg-token"],
        "webhook_secrets": ["old-secret", "new-secret"],
        "public_url": "http://ondemand.test",
        "default_backends": ["cpu"],
        "changes_dir": Path(tempfile.gettempdir()) / "ondemand-test-changes",
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]
