"""Alembic environment: uses the connection handed over by service.migrate, or the
ONDEMAND_DATABASE_URL when run from the alembic CLI."""

from __future__ import annotations

from alembic import context

from service.db import models  # noqa: F401  (registers the tables on Base.metadata)
from service.db.engine import Base, make_engine
from service.settings import Settings

target_metadata = Base.metadata


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=target_metadata)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = make_engine(Settings().database_url)
    with engine.connect() as conn:
        context.configure(connection=conn, target_metadata=target_metadata)
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


run_migrations_online()
