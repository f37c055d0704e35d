"""Fixtures of the service tests: a fresh database on SQLite and on PostgreSQL."""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from service.db.engine import make_engine
from service.db.migrate import upgrade
from tests.service.helpers import sqlite_template

PG_CONNINFO = "host=127.0.0.1 port=5432 dbname=test user=postgres connect_timeout=3"


def _pg_reachable() -> str | None:
    try:
        with psycopg.connect(PG_CONNINFO):
            return None
    except psycopg.Error as exc:
        return f"PostgreSQL at 127.0.0.1:5432 (database test) is unreachable: {exc}"


@pytest.fixture(scope="session")
def sqlite_at_head() -> Path:
    """A SQLite file migrated to the schema's head once a worker, for the tests that need a
    database, not its migration: every migration from empty rebuilt tables on SQLite, ~0.1 s
    of CPU a test. The migrations themselves are tested from empty (test_store, test_startup)."""
    return sqlite_template()


BOTH = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=BOTH)
def empty_db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of an empty database (for the migrations themselves)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ondemand.db'}"
    else:
        yield from _pg_schema_url()


@pytest.fixture(params=BOTH)
def db_url(request: pytest.FixtureRequest, tmp_path: Path, sqlite_at_head: Path) -> Iterator[str]:
    """A URL of a database of its own at the schema's head (the service's start-up migration
    finds nothing to do): a copy of a SQLite file, or a PostgreSQL database made from a
    template at head (`pg_at_head`), dropped after."""
    if request.param == "sqlite":
        path = tmp_path / "ondemand.db"
        shutil.copyfile(sqlite_at_head, path)
        yield f"sqlite:///{path}"
    else:
        template = request.getfixturevalue("pg_at_head")
        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
        try:
            yield _pg_database_url(name)
        finally:
            with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_at_head() -> Iterator[str]:
    """A PostgreSQL database migrated to the schema's head once a worker, the template each
    `db_url` database is made from (a file copy on the server): a migration from empty costs
    the test about 0.1 s of CPU and the server a second. The migrations themselves are tested
    from empty (`empty_db_url`)."""
    _skip_without_pg()
    name = f"at_head_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    try:
        engine = make_engine(_pg_database_url(name))
        try:
            upgrade(engine)
        finally:
            engine.dispose()  # a template takes no connection while it is copied
        yield name
    finally:
        with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


def _pg_database_url(name: str) -> str:
    return f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL schema (for PostgreSQL-only behaviour)."""
    yield from _pg_schema_url()


def _skip_without_pg() -> None:
    why = _pg_reachable()
    if why:
        if os.environ.get("CI"):  # CI has PostgreSQL: its absence there is a failure, not a skip
            pytest.fail(why)
        pytest.skip(why)


def _pg_schema_url() -> Iterator[str]:
    _skip_without_pg()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        yield (
            f"postgresql+psycopg://postgres@127.0.0.1:5432/test?options=-csearch_path%3D{schema}"
        )
    finally:
        with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
