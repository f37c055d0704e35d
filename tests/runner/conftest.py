"""Fixtures of the runner tests: a tiny real git repository and a shared runner cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.runner.tinyrepo import TinyRepo, make_tiny_repo


@pytest.fixture(scope="session")
def tiny_repo(tmp_path_factory: pytest.TempPathFactory) -> TinyRepo:
    return make_tiny_repo(tmp_path_factory.mktemp("origin") / "tinyops")


@pytest.fixture(scope="session")
def runner_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Mirrors and Python environments, shared so that later tests reuse them (as a runner)."""
    return tmp_path_factory.mktemp("runner-cache")
