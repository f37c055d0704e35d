"""Small builders shared by the service tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from service.db import make_engine, make_sessionmaker
from service.migrate import upgrade
from service.store import NewJob, Store


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
