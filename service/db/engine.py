"""The database: engine and sessions on SQLite (WAL, immediate transactions for writes, queued
on an in-process lock) or PostgreSQL, and `Database`, the one object the repositories and
workers take."""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import DateTime, Engine, Select, create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker
from sqlalchemy.types import TypeDecorator

from service.db.outage import Outages

SQLITE_BUSY_TIMEOUT_MS = 30_000
IMMEDIATE = "ondemand_sqlite_immediate"  # execution option: begin SQLite with BEGIN IMMEDIATE


class Base(DeclarativeBase):
    pass


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC datetime on every backend (SQLite stores it naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime: use datetime.now(UTC)")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Any) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


class _WriterQueuedConnection(sqlite3.Connection):
    """A SQLite connection whose write transactions first take its engine's `lock`, released
    once the transaction has ended (after COMMIT or ROLLBACK, so the next writer finds
    SQLite's lock free)."""

    lock: threading.Lock
    _holds = False

    def take_write_lock(self) -> None:
        if not self.lock.acquire(timeout=SQLITE_BUSY_TIMEOUT_MS / 1000):
            busy = sqlite3.OperationalError("database is locked (this process's writers)")
            raise sa_exc.OperationalError("BEGIN IMMEDIATE", None, busy)
        self._holds = True

    def release_write_lock(self) -> None:
        if self._holds:
            self._holds = False
            self.lock.release()

    def commit(self) -> None:
        try:
            super().commit()
        finally:
            self.release_write_lock()

    def rollback(self) -> None:
        try:
            super().rollback()
        finally:
            self.release_write_lock()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.release_write_lock()


def make_engine(url: str, **kwargs: Any) -> Engine:
    """An engine for `url`. SQLite gets WAL and a busy timeout; sessions from
    `make_sessionmaker(engine, write=True)` begin with `BEGIN IMMEDIATE`, so that concurrent
    writers queue on the lock instead of failing when a read turns into a write.

    SQLite has one writer at a time, and its busy handler makes waiting writers sleep and poll:
    under a burst most of them sleep through the moment the lock is free, and throughput
    collapses. So this process's writers first queue on a `threading.Lock` (handed straight to
    the next waiter) and only then take SQLite's; the busy timeout still covers other processes.
    A write transaction must therefore never open a second write transaction: it would wait on
    itself (bounded by the busy timeout, then "database is locked")."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        return create_engine(parsed, pool_pre_ping=True, **kwargs)
    database = parsed.database
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    writers = threading.Lock()

    class Connection(_WriterQueuedConnection):
        lock = writers

    engine = create_engine(
        parsed,
        connect_args={
            "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000,
            "check_same_thread": False,
            "factory": Connection,
        },
        **kwargs,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None  # let the "begin" hook below issue BEGIN
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA synchronous=NORMAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Any) -> None:
        if not conn.get_execution_options().get(IMMEDIATE, False):
            conn.exec_driver_sql("BEGIN")
            return
        dbapi_conn = conn.connection.dbapi_connection
        dbapi_conn.take_write_lock()
        try:
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        except BaseException:
            dbapi_conn.release_write_lock()
            raise

    return engine


def make_sessionmaker(engine: Engine, *, write: bool = False) -> sessionmaker[Any]:
    """Sessions for reads, or (write=True) for transactions that write."""
    bind = engine.execution_options(**{IMMEDIATE: True}) if write else engine
    return sessionmaker(bind, expire_on_commit=False)


S = TypeVar("S", bound=Select[Any])


@dataclass(frozen=True)
class Database:
    """An engine with its two session factories: `reads`, and `writes` for transactions that
    write (on SQLite they take the write lock at BEGIN, so a read that turns into a write never
    fails on a busy database)."""

    engine: Engine
    reads: sessionmaker[Session]
    writes: sessionmaker[Session]
    outages: Outages = field(default_factory=Outages)

    @classmethod
    def connect(cls, url: str, **kwargs: Any) -> Database:
        engine = make_engine(url, **kwargs)
        db = cls(engine, make_sessionmaker(engine), make_sessionmaker(engine, write=True))
        # A connection handed out (after pool_pre_ping) is the sign an outage may be over.
        event.listen(engine, "engine_connect", lambda _conn: db.outages.succeeded())
        return db

    @property
    def postgres(self) -> bool:
        return self.engine.dialect.name == "postgresql"

    def for_update(self, stmt: S, *, skip_locked: bool = False) -> S:
        """`stmt` locking the rows it reads on PostgreSQL (SQLite's write lock covers them)."""
        return stmt.with_for_update(skip_locked=skip_locked) if self.postgres else stmt

    def dispose(self) -> None:
        self.engine.dispose()
