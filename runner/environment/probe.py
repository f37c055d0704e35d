"""What the job ran on (device, vendor, driver, torch, triton, torch_musa) and whether the
backend's device is usable, both asked of the Python the steps use, in a subprocess."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from workflows.models import EnvironmentInfo

# Runs in the job's Python (isolated: `-I`, so neither the working directory nor PYTHONPATH
# is on its path, and nothing of the checkout is imported); prints one JSON object. Versions
# come from package metadata and the NVIDIA device from nvidia-smi, so nothing is imported and
# no device is initialized; only a MUSA host imports torch_musa to name its device. Every
# probe is optional.
_PROBE = r"""
import json, os, platform, re, subprocess
from importlib import metadata, util

info = {"python": platform.python_version()}
for key in ("torch", "triton", "torch_musa"):
    try:
        info[key] = metadata.version(key)
    except metadata.PackageNotFoundError:
        pass


def cuda_version():
    try:
        spec = util.find_spec("torch")
        text = open(os.path.join(os.path.dirname(spec.origin), "version.py")).read()
    except Exception:
        return None
    found = re.search(r"^cuda\b[^=]*=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return found.group(1) if found else None


if "torch_musa" in info:
    try:
        import torch, torch_musa
        if torch.musa.is_available():
            info["device_name"] = torch.musa.get_device_name()
            info["driver"] = "MUSA " + str(getattr(torch.version, "musa", "") or "")
    except Exception:
        pass
else:
    device = (os.environ.get("CUDA_VISIBLE_DEVICES") or "").split(",")[0].strip()
    argv = ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
    if device:
        argv += ["-i", device]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        first = done.stdout.strip().splitlines()[0] if done.returncode == 0 else ""
    except Exception:
        first = ""
    if "," in first:
        name, driver = (part.strip() for part in first.split(",", 1))
        cuda = cuda_version()
        info["device_name"] = name
        info["driver"] = f"{driver} (CUDA {cuda})" if cuda else driver
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
            [str(python), "-I", "-c", _PROBE],
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
