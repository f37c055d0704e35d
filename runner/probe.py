"""What the job ran on (device, vendor, driver, torch, triton, torch_musa) and whether the
backend's device is usable, both asked of the Python the steps use, in a subprocess."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from workflows.models import EnvironmentInfo

# Runs in the job's Python; prints one JSON object. Every probe is optional.
_PROBE = r"""
import json, platform, subprocess
info = {"python": platform.python_version()}
try:
    import torch
    info["torch"] = torch.__version__
    if torch.cuda.is_available():
        info["device_name"] = torch.cuda.get_device_name()
        info["driver"] = "CUDA " + str(torch.version.cuda)
        try:
            argv = ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]
            out = subprocess.run(argv, capture_output=True, text=True, timeout=20).stdout.split()
            if out:
                info["driver"] = out[0] + " (CUDA " + str(torch.version.cuda) + ")"
        except Exception:
            pass
except Exception:
    torch = None
try:
    import torch_musa
    info["torch_musa"] = getattr(torch_musa, "__version__", "present")
    if torch is not None and torch.musa.is_available():
        info["device_name"] = torch.musa.get_device_name()
        info["driver"] = "MUSA " + str(getattr(torch.version, "musa", "") or "")
except Exception:
    pass
try:
    import triton
    info["triton"] = triton.__version__
except Exception:
    pass
if "device_name" not in info:
    info["device_name"] = (platform.processor() or platform.machine()) + " (CPU)"
print(json.dumps(info))
"""


@dataclass(frozen=True)
class DeviceCheck:
    healthy: bool
    reason: str | None
    output: str = ""


def environment_info(
    python: Path | str,
    env: Mapping[str, str],
    *,
    vendor: str,
    runner_name: str | None,
    runner_version: str | None,
    cwd: Path | None = None,
) -> EnvironmentInfo:
    """The EnvironmentInfo of the job's Python; fields that cannot be read stay None."""
    data: dict[str, str] = {}
    try:
        proc = subprocess.run(
            [str(python), "-c", _PROBE],
            env=dict(env),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        lines = proc.stdout.strip().splitlines()
        if proc.returncode == 0 and lines:
            data = json.loads(lines[-1])
    except (OSError, subprocess.TimeoutExpired, json.JSONDecodeError):
        pass
    known = set(EnvironmentInfo.model_fields)
    fields = {k: str(v) for k, v in data.items() if k in known}
    return EnvironmentInfo(
        **fields, vendor=vendor, runner_name=runner_name, runner_version=runner_version
    )


def device_check(
    argv: Sequence[str], env: Mapping[str, str], timeout_s: float = 120, cwd: Path | None = None
) -> DeviceCheck:
    """Run the workflow's device check; healthy when it exits 0, else the last line says why."""
    if not argv:
        return DeviceCheck(True, None)
    try:
        proc = subprocess.run(
            list(argv),
            env=dict(env),
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return DeviceCheck(False, f"device check timed out after {timeout_s:.0f}s")
    except OSError as exc:
        return DeviceCheck(False, f"device check could not start: {exc}")
    output = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0:
        last = output.splitlines()[-1] if output else f"exit status {proc.returncode}"
        return DeviceCheck(False, f"device check failed: {last}", output)
    return DeviceCheck(True, None, output)
