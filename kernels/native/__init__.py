"""The kernels' C++ helper, compiled on first use against the torch in this process.

A tiny call's host time is Python around two C++ parts, making its outputs and Triton's C
launch function: each `torch.empty*` parses its arguments and dispatches, and the launch path
checks, gathers addresses and spreads arguments, and the plan lookup keys the call. `host.cpp`
does all of it in one Python call: `call(states, extra, *tensors)` keys the call by its
tensors (`key`), finds the plan's state (`kernels.launch.native_state`), makes the outputs
and launches the plan's compiled kernel; a call it does not know returns None, for the
Python path (`kernels.ops._adaptive.PlanCache`). It is built once per torch, Python and
source with the system C++ compiler (argv lists, no shell) into the compile cache:
`$TRITON_CACHE_DIR` where set, so the runner's rules for that cache hold for it too (a job
reads the entries trusted builds published and writes only its own layer), else Triton's
default `~/.triton/cache`. An entry is `native-<key>/<module file>`, `key` hashing
everything the binary depends on; concurrent processes build it once, under a lock.

Where it cannot be built (no compiler, no Python or torch headers, `KERNELS_NATIVE=0`) the
callers keep the Python path: same results, more host time. `status()` says which.
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.machinery
import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from types import ModuleType

import torch

SOURCE = Path(__file__).with_name("host.cpp")
MODULE = "_kernels_host"  # the name host.cpp's PyInit_ function carries
BUILD_TIMEOUT_S = 600
_reason = "not loaded yet"


def cache_root() -> Path:
    """Where built helpers live: Triton's compile cache (see the module's docstring)."""
    configured = os.environ.get("TRITON_CACHE_DIR", "").strip()
    return Path(configured) if configured else Path.home() / ".triton" / "cache"


def compile_command(source: Path, output: Path, standard: str) -> list[str] | None:
    """The compiler's argv for `source` -> `output`, or None where a part is missing."""
    compiler = shutil.which(os.environ.get("CXX", "").strip() or "c++")
    python_include = Path(sysconfig.get_paths()["include"])
    torch_root = Path(torch.__file__).parent
    include, lib = torch_root / "include", torch_root / "lib"
    if compiler is None or not (python_include / "Python.h").is_file() or not include.is_dir():
        return None
    abi = int(bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True)))
    return [
        compiler,
        "-O2",
        "-shared",
        "-fPIC",
        f"-std={standard}",
        "-w",
        f"-D_GLIBCXX_USE_CXX11_ABI={abi}",
        "-I",
        str(include),
        "-I",
        str(include / "torch" / "csrc" / "api" / "include"),
        "-I",
        str(python_include),
        str(source),
        "-o",
        str(output),
        "-L",
        str(lib),
        "-ltorch_python",
        "-ltorch_cpu",
        "-lc10",
        f"-Wl,-rpath,{lib}",
    ]


def entry_key(source: bytes) -> str:
    """What the binary depends on: its source, torch, Python and the compiler asked for."""
    parts = [
        source,
        torch.__version__.encode(),
        sys.version.encode(),
        (sysconfig.get_config_var("EXT_SUFFIX") or "").encode(),
        os.environ.get("CXX", "").encode(),
    ]
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:32]


def build(root: Path) -> Path:
    """The helper's module file under `root`, compiled first where absent. Raises OSError
    (with the compiler's last words) where it cannot be built."""
    source = SOURCE.read_bytes()
    entry = root / f"native-{entry_key(source)}"
    target = entry / f"{MODULE}{sysconfig.get_config_var('EXT_SUFFIX') or '.so'}"
    if target.is_file():
        return target
    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{entry.name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time; closing the file unlocks
        if target.is_file():  # another process built it while this one waited
            return target
        with tempfile.TemporaryDirectory(dir=root, prefix=".native-build-") as scratch:
            built = Path(scratch) / target.name
            errors = ""
            for standard in ("c++20", "c++17"):  # newer torch headers need C++20
                argv = compile_command(SOURCE, built, standard)
                if argv is None:
                    raise OSError("no C++ compiler, Python headers or torch headers")
                done = subprocess.run(
                    argv, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, check=False
                )
                if done.returncode == 0:
                    break
                errors = (done.stderr or done.stdout).strip()[-2000:]
            else:
                raise OSError(f"compiling {SOURCE.name} failed: {errors}")
            entry.mkdir(exist_ok=True)
            built.chmod(0o644)
            os.replace(built, target)
    return target


def _load(path: Path) -> ModuleType:
    loader = importlib.machinery.ExtensionFileLoader(MODULE, str(path))
    spec = importlib.util.spec_from_file_location(MODULE, path, loader=loader)
    if spec is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@functools.cache
def host() -> ModuleType | None:
    """The compiled helper (`key`, `call`), or None where it cannot be had; the
    first call builds or loads it."""
    global _reason
    if os.environ.get("KERNELS_NATIVE", "").strip() == "0":
        _reason = "off (KERNELS_NATIVE=0)"
        return None
    try:
        module = _load(build(cache_root()))
    except (OSError, ImportError, subprocess.SubprocessError) as exc:
        _reason = f"unavailable: {exc}"
        return None
    _reason = f"loaded from {module.__file__}"
    return module


def status() -> str:
    """Whether the helper is in use, and why not where it is not."""
    return _reason
