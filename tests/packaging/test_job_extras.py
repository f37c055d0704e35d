"""What a workflow installs into every job of this repository stays what a job needs: the
runner installs these extras on GPU hosts that may have no package index, so a development
tool added to one of them breaks every job there at its environment step."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
# The test steps' tools; a GPU host has them or gets them from the runner's wheelhouse.
JOB_PACKAGES = {"pytest", "pytest-timeout", "pytest-xdist", "hypothesis"}


def test_the_extras_jobs_install_hold_only_test_step_tools() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    seen = 0
    for workflow in sorted((ROOT / "workflows").glob("*.yaml")):
        spec = yaml.safe_load(workflow.read_text())
        for extra in spec.get("python_env", {}).get("extras", []):
            names = {Requirement(r).name.lower() for r in extras[extra]}
            assert names <= JOB_PACKAGES, f"{workflow.name}: [{extra}] has {names - JOB_PACKAGES}"
            seen += 1
    assert seen >= 3  # the cpu, nvidia and mthreads workflows each install one
