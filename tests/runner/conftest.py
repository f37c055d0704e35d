"""Fixtures of the runner tests: a tiny real git repository, a shared runner cache, and for
the tests that run steps as the job user, that user and a way for it to the runner's Python."""

from __future__ import annotations

import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runner import reach
from tests.runner.tinyrepo import TinyRepo, make_tiny_repo

JOB_USER = "ondemand-job"


@pytest.fixture(scope="session")
def tiny_repo(tmp_path_factory: pytest.TempPathFactory) -> TinyRepo:
    return make_tiny_repo(tmp_path_factory.mktemp("origin") / "tinyops")


@pytest.fixture(scope="session")
def runner_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Mirrors and Python environments, shared so that later tests reuse them (as a runner)."""
    return tmp_path_factory.mktemp("runner-cache")


@pytest.fixture(scope="module")
def job_user() -> pwd.struct_passwd:
    """The job user, created as the systemd unit and the runner image create it."""
    try:
        return pwd.getpwnam(JOB_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
             "--shell", "/usr/sbin/nologin", JOB_USER],
            check=True,
        )  # fmt: skip
        return pwd.getpwnam(JOB_USER)


@pytest.fixture(scope="module")
def reachable_python() -> Iterator[None]:
    """The job user must be able to run the runner's Python (here under /root): let it pass
    through the directories on the way while any such test runs (tests/runner/reach.py)."""
    with reach.reachable_python():
        yield


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory the job user can pass through (pytest's own are private to root)."""
    path = Path(tempfile.mkdtemp(prefix="ondemand-job-"))
    path.chmod(0o711)
    yield path
    shutil.rmtree(path, ignore_errors=True)
