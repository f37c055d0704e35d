"""A job context for tests: its caches and job directory under one temporary directory."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runner.job.execute import JobContext
from runner.job.workspace import Workspaces


def job_context(
    tmp_path: Path, on_output: Callable[[bytes], object] = lambda _: None, **overrides: Any
) -> JobContext:
    """Mirrors under `cache`, environments under `envs`, the job in `job`; `overrides` are
    JobContext's other fields (`packages`, `jail`, …)."""
    return JobContext(
        workspaces=Workspaces(tmp_path / "cache"),
        env_cache=tmp_path / "envs",
        job_dir=tmp_path / "job",
        runner_name="r",
        runner_version="0",
        on_output=on_output,
        cancel=threading.Event(),
        **overrides,
    )
