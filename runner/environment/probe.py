"""What the job ran on (device, vendor, driver, torch, triton, the vendor's packages) and
whether the backend's device is usable, both asked of the Python the steps use, in a
subprocess. What to ask comes from the workflow's `device:` section: the probe names no
vendor."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from workflows.models import EnvironmentInfo
from workflows.spec import WorkflowSpec

# Runs in the job's Python (isolated: `-I`, so neither the working directory nor PYTHONPATH
# is on its path, and nothing of the checkout is imported); its one argument is the JSON the
# workflow's device section makes (`_question`); prints one JSON object. Versions come from
# package metadata; the device from the workflow's query tool (nothing imported, no device
# initialized; the runtime's version read from torch's version.py), else from torch's device
# module after the vendor's plugin is imported. Every probe is optional.
_PROBE = r"""
import json, os, platform, re, subprocess, sys
from importlib import metadata, util

ask = json.loads(sys.argv[1])
info = {"python": platform.python_version(), "versions": {}}
for name in ask["packages"]:
    try:
        info["versions"][name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        pass


def torch_version_file(attribute):
    try:
        spec = util.find_spec("torch")
        text = open(os.path.join(os.path.dirname(spec.origin), "version.py")).read()
    except Exception:
        return None
    found = re.search(r"^" + attribute + r"\b[^=]*=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return found.group(1) if found else None


def by_query():
    visible = (os.environ.get(ask["visible"] or "") or "").split(",")[0].strip()
    argv = [arg.replace("{device}", visible or "0") for arg in ask["query"]]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=20)
        first = done.stdout.strip().splitlines()[0] if done.returncode == 0 else ""
    except Exception:
        first = ""
    if "," in first:
        name, driver = (part.strip() for part in first.split(",", 1))
        runtime = torch_version_file(ask["version"]) if ask["version"] else None
        info["device_name"] = name
        info["driver"] = f"{driver} ({ask['label']} {runtime})" if runtime else driver


def by_module():
    try:
        import importlib
        import torch
        if ask["plugin"]:
            importlib.import_module(ask["plugin"])
        module = getattr(torch, ask["module"])
        if module.is_available():
            info["device_name"] = module.get_device_name()
            if ask["version"]:
                version = getattr(torch.version, ask["version"], "") or ""
                info["driver"] = ask["label"] + " " + str(version)
    except Exception:
        pass


if ask["query"]:
    by_query()
elif ask["module"] and (not ask["plugin"] or util.find_spec(ask["plugin"]) is not None):
    by_module()
if "device_name" not in info:
    info["device_name"] = (platform.processor() or platform.machine()) + " (CPU)"
print(json.dumps(info))
"""
_FIELDS = frozenset({"python", "device_name", "driver"})


def _question(workflow: WorkflowSpec) -> str:
    """What the probe asks, from the workflow's device section: one argv element of JSON."""
    device = workflow.device
    return json.dumps(
        {
            "packages": list(device.reported()),
            "plugin": device.plugin,
            "module": device.module,
            "version": device.version,
            "label": device.driver_label(),
            "query": device.query,
            "visible": workflow.visible_devices_var,
        }
    )


@dataclass(frozen=True)
class DeviceCheck:
    healthy: bool
    reason: str | None
    output: str = ""


def environment_info(
    python: Path | str,
    env: Mapping[str, str],
    workflow: WorkflowSpec,
    *,
    runner_name: str | None,
    runner_version: str | None,
    cwd: Path | None = None,
) -> EnvironmentInfo:
    """The EnvironmentInfo of the job's Python on `workflow`'s device; fields that cannot be
    read stay None, and the vendor's packages the Python lacks are left out."""
    data: dict[str, object] = {}
    try:
        proc = subprocess.run(
            [str(python), "-I", "-c", _PROBE, _question(workflow)],
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
    fields = {k: str(v) for k, v in data.items() if k in _FIELDS}
    found = data.get("versions")
    versions = {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}
    return EnvironmentInfo(
        **fields,
        torch=versions.pop("torch", None),
        triton=versions.pop("triton", None),
        packages=versions,
        vendor=workflow.vendor,
        runner_name=runner_name,
        runner_version=runner_version,
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
