"""Small builders shared by the service tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import httpx

from service.app import create_app
from service.context import Context
from service.db import make_engine, make_sessionmaker
from service.github import GitHubClient
from service.migrate import upgrade
from service.settings import Settings
from service.store import NewJob, Store
from tests.support.live import live_server


@contextmanager
def open_store(url: str, **kwargs: object) -> Iterator[Store]:
    """A migrated database at `url` and a Store over it."""
    engine = make_engine(url)
    upgrade(engine)
    try:
        yield Store(make_sessionmaker(engine), **kwargs)  # type: ignore[arg-type]
    finally:
        engine.dispose()


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
    """The real app under uvicorn on loopback, with its context for direct checks."""
    app = create_app(settings, github=github)
    with live_server(app) as url:
        yield LiveService(url=url, ctx=app.state.ctx)


@dataclass
class LiveService:
    url: str
    ctx: Context

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
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]
