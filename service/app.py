"""`create_app(settings)`: the FastAPI service with its background workers."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from sqlalchemy.engine import make_url

from service import pages, runner_api, webhook
from service.context import Context
from service.db import make_engine, make_sessionmaker
from service.github import GitHubClient
from service.migrate import upgrade
from service.outbox import OutboxWorker
from service.processor import Processor
from service.reaper import LeaseReaper
from service.reporting import Reporter
from service.settings import Settings
from service.store import Store
from service.wakeup import PgListener, Wakeup
from workflows.spec import backend_names, load_workflows

log = logging.getLogger(__name__)


def build_context(settings: Settings, github: GitHubClient | None = None) -> Context:
    """Open (and migrate) the database and wire the parts together."""
    engine = make_engine(settings.database_url)
    upgrade(engine)
    sessions = make_sessionmaker(engine)
    workflows = load_workflows(settings.workflows_dir)
    unknown = [b for b in settings.default_backends if b not in backend_names(workflows)]
    if unknown:
        raise ValueError(
            f"ONDEMAND_DEFAULT_BACKENDS: unknown backend(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(workflows))}"
        )
    wakeup = Wakeup()
    store = Store(
        sessions,
        lease_seconds=settings.lease_seconds,
        runner_online_seconds=settings.runner_online_seconds,
        wakeup=wakeup,
    )
    ctx = Context(
        settings=settings,
        engine=engine,
        sessions=sessions,
        writes=store.writes,
        store=store,
        wakeup=wakeup,
        workflows=workflows,
        backend_names=backend_names(workflows),
    )
    ctx.github = github or GitHubClient.from_settings(settings)
    ctx.reporter = Reporter(ctx)
    store.listener = ctx.reporter
    ctx.outbox = OutboxWorker(ctx)
    ctx.processor = Processor(ctx)
    store.on_commit = ctx.outbox.kick
    return ctx


def create_app(settings: Settings | None = None, *, github: GitHubClient | None = None) -> FastAPI:
    """The service. Its lifespan runs the command processor, the outbox worker, the lease
    reaper and (on PostgreSQL) the LISTEN thread."""
    settings = settings or Settings()
    ctx = build_context(settings, github)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        listener: PgListener | None = None
        if ctx.engine.dialect.name == "postgresql":
            conninfo = make_url(settings.database_url).set(drivername="postgresql")
            listener = PgListener(conninfo.render_as_string(hide_password=False), ctx.wakeup)
            listener.start()
        reaper = LeaseReaper(ctx.store, ctx.stopping)
        assert ctx.outbox is not None and ctx.processor is not None
        if settings.process_workers:
            reaper.start()
            ctx.outbox.start()
            ctx.processor.start()
        try:
            yield
        finally:
            ctx.stopping.set()
            ctx.wakeup.notify("*")
            if settings.process_workers:
                ctx.processor.join()
                ctx.outbox.join()
                reaper.join()
            if listener is not None:
                listener.stop()
            ctx.engine.dispose()

    app = FastAPI(title="ondemand", lifespan=lifespan)
    app.state.ctx = ctx
    app.include_router(runner_api.router)
    app.include_router(webhook.router)
    app.include_router(pages.router)
    return app
