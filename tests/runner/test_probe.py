"""The environment probe: versions from package metadata, the NVIDIA device from nvidia-smi,
and nothing imported from the directory it runs in or from PYTHONPATH."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from runner.environment.probe import environment_info
from workflows.spec import load_workflows

WORKFLOWS = load_workflows()


def test_versions_and_an_nvidia_device_without_importing_anything(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi = bin_dir / "nvidia-smi"
    smi.write_text(
        '#!/bin/sh\necho "$@" > "$(dirname "$0")/args"\necho "NVIDIA H200, 580.159.04"\n'
    )
    smi.chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "CUDA_VISIBLE_DEVICES": "3,4"}
    info = environment_info(
        sys.executable, env, WORKFLOWS["nvidia"], runner_name="r", runner_version="1", cwd=tmp_path
    )
    assert info.device_name == "NVIDIA H200" and (info.driver or "").startswith("580.159.04")
    assert info.torch and info.triton and info.python
    assert "-i 3" in (bin_dir / "args").read_text()  # the slot's own device


def test_nothing_of_the_directory_or_pythonpath_is_imported(tmp_path: Path) -> None:
    """A pull request's `torch.py` (or `platform.py`) must not run in the probe."""
    trap = tmp_path / "checkout"
    trap.mkdir()
    marker = str(tmp_path / "pwned")
    for name in ("torch", "triton", "platform", "json", "sitecustomize"):
        (trap / f"{name}.py").write_text(f"open({marker!r}, 'a').write({name!r})\n")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(trap)}
    info = environment_info(
        sys.executable, env, WORKFLOWS["cpu"], runner_name="r", runner_version="1", cwd=trap
    )
    assert not (tmp_path / "pwned").exists()
    assert info.device_name and info.device_name.endswith("(CPU)") and info.torch
