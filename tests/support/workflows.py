"""Workflow files narrowed for end-to-end runs that must stay quick."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def small_cpu_workflows(directory: Path) -> Path:
    """A workflow directory whose cpu.yaml's accuracy step selects one test function in
    float32 and whose benchmark (and its comparison) times one dtype, briefly."""
    spec = yaml.safe_load((ROOT / "workflows" / "cpu.yaml").read_text())
    for step in spec["steps"]:
        if step["kind"] == "accuracy":
            step["argv"] += ["-k", "test_upstream_shapes and float32"]
        if step["kind"] == "benchmark":
            narrow = ["--dtypes", "float32", "--host-reps", "1", "--no-progress"]
            step["argv"] += narrow
            step["compare"]["argv"] += narrow  # the pull request against its merge base
            step["compare"]["budget_s"] = 2  # the rounds' mechanics, not their precision
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "cpu.yaml").write_text(yaml.safe_dump(spec))
    return directory
