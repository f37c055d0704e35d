"""Bring a database's schema up to date with the Alembic migrations (run at service startup).
Alembic's own chatter (its context, each revision) is kept below warnings; one line says what
changed, if anything did."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Connection, Engine

ALEMBIC_INI = Path(__file__).resolve().parent / "alembic.ini"
log = logging.getLogger(__name__)


def alembic_config() -> Config:
    cfg = Config(str(ALEMBIC_INI))
    cfg.set_main_option("script_location", str(ALEMBIC_INI.parent / "migrations"))
    return cfg


@contextmanager
def _quiet(name: str = "alembic") -> Iterator[None]:
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        logger.setLevel(level)


def current_revision(conn: Connection) -> str | None:
    """The schema's Alembic revision (None: an empty database)."""
    return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Apply every migration up to `revision` on `engine`'s database."""
    cfg = alembic_config()
    with _quiet(), engine.begin() as conn:
        before = current_revision(conn)
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)
        after = current_revision(conn)
    if before != after:
        log.info("database schema migrated from %s to %s", before or "empty", after)
