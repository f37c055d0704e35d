"""The environment a step runs in: an allow-list of variables, never the runner's own secrets,
and no network where the host lets us take it away.

The steps run code from a pull request. They get PATH, a per-job HOME, the locale, the
workflow's variables, the slot's visible-devices variable and cache directories, and nothing
else: no runner token, no service URL, no cloud credentials inherited from the daemon.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path

# Inherited from the daemon's environment when set; everything else is dropped.
INHERITED = ("PATH", "LANG", "LC_ALL", "TZ", "LD_LIBRARY_PATH", "MUSA_HOME", "CUDA_HOME")
# Names a workflow may never set, whatever its file says.
FORBIDDEN_PREFIXES = ("ONDEMAND_",)


def scrubbed_env(
    source: Mapping[str, str],
    *,
    home: Path,
    workflow_env: Mapping[str, str],
    extra: Mapping[str, str] | None = None,
    visible_devices: tuple[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a step, built from an allow-list (see the module docstring).

    `visible_devices` is (variable, value), e.g. ("CUDA_VISIBLE_DEVICES", "1") for slot 1.
    """
    env = {name: source[name] for name in INHERITED if name in source}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.setdefault("LANG", "C.UTF-8")
    cache = home / ".cache"
    env.update(
        HOME=str(home),
        TMPDIR=str(home / "tmp"),
        XDG_CACHE_HOME=str(cache),
        TRITON_CACHE_DIR=str(cache / "triton"),
        TORCHINDUCTOR_CACHE_DIR=str(cache / "torchinductor"),
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONUNBUFFERED="1",
        GIT_TERMINAL_PROMPT="0",
    )
    for mapping in (workflow_env, extra or {}):
        for name, value in mapping.items():
            if name.startswith(FORBIDDEN_PREFIXES):
                continue
            env[name] = value
    if visible_devices is not None:
        var, value = visible_devices
        env[var] = value
    (home / "tmp").mkdir(parents=True, exist_ok=True)
    return env


def visible_devices(var: str | None, device: str | None) -> tuple[str, str] | None:
    """The (variable, value) that pins a step to `device`, e.g. ("CUDA_VISIBLE_DEVICES", "1");
    None when the backend has no such variable or the slot is not pinned to a device."""
    if var and device is not None:
        return var, device
    return None


@functools.cache
def network_isolation_prefix() -> tuple[str, ...]:
    """argv prefix that runs a command without network, or () when the host does not allow it.

    Detected once by trying: `unshare -n` (root or CAP_SYS_ADMIN), then `unshare -r -n` (an
    unprivileged user namespace). Loopback stays down inside: the steps need no network.
    """
    unshare = shutil.which("unshare")
    if unshare is None:
        return ()
    for prefix in ((unshare, "-n"), (unshare, "-r", "-n")):
        try:
            ok = subprocess.run(
                [*prefix, "true"], capture_output=True, timeout=10, check=False
            ).returncode
        except (OSError, subprocess.TimeoutExpired):
            continue
        if ok == 0:
            return prefix
    return ()
