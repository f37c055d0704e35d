"""Fixtures of the web tests: the service tests' databases (SQLite and PostgreSQL), and one
headless Chromium per session for the browser tests (Debian's `/usr/bin/chromium`; Playwright
never downloads a browser here)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.service.conftest import (  # noqa: F401  (fixtures used here)
    db_url,
    pg_at_head,
    pg_url,
    sqlite_at_head,
)

CHROMIUM = Path(os.environ.get("ONDEMAND_CHROMIUM", "/usr/bin/chromium"))


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """A headless Chromium for a module's tests. Not for the session: Playwright's sync API
    keeps an event loop running in the main thread while it is open, and a later test of the
    same worker that calls `asyncio.run` would find it there."""
    if not CHROMIUM.exists():
        why = f"no Chromium at {CHROMIUM} (apt-get install chromium; .ci/run does)"
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            yield chromium
        finally:
            chromium.close()
