"""The service's parts, built once per app and shared by its routes and background workers."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from fastapi import Request
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from service.settings import Settings
from service.store import Store
from service.wakeup import Wakeup
from workflows.spec import WorkflowSpec

if TYPE_CHECKING:
    from service.github import GitHubClient
    from service.outbox import OutboxWorker
    from service.processor import Processor
    from service.reporting import Reporter


@dataclass
class Context:
    settings: Settings
    engine: Engine
    sessions: sessionmaker[Session]
    writes: sessionmaker[Session]
    store: Store
    wakeup: Wakeup
    workflows: dict[str, WorkflowSpec]
    backend_names: dict[str, str]
    github: GitHubClient | None = None
    reporter: Reporter | None = None
    outbox: OutboxWorker | None = None
    processor: Processor | None = None
    stopping: threading.Event = field(default_factory=threading.Event)
    extras: dict[str, Any] = field(default_factory=dict)


def get_context(request: Request) -> Context:
    ctx: Context = request.app.state.ctx
    return ctx
