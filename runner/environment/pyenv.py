"""The job's Python environment: the host's torch and the vendor's packages, plus what the
repository declares and the host lacks; cached by the hash of the repository's dependency files.

The host is the job's interpreter (`runner.environment.interpreter`): the Python with the
vendor's torch, which may be another than the runner's own (a vendor's CPython 3.10 while the
runner runs on 3.12). Everything here asks that interpreter, never the runner's `sys`.

What the environment installs, uses from the host or refuses is the plan of
`runner.environment.requirements` (host first; torch, triton and the workflow's
`device.host_only` are never installed: GPU hosts bring their own); what the host lacks comes
from the runner's wheelhouse and/or index (`runner.environment.sources`), wheels only.

The scheme, chosen to be quick and to never reinstall torch:
- a venv (the host's `python -m venv --without-pip`, milliseconds) whose `_ondemand_host.pth`
  lists the host interpreter's site-packages directories, so torch, triton and the vendor's
  packages (which come with its stack, not from an index) import from the host. Only the
  directory lines are added: the host's `.pth` hooks (editable installs of other projects) do
  not run;
- the repository's requirements (`project.dependencies`, the workflow's extras, its
  requirements files) that the host does not already satisfy are `pip install`ed into the
  venv — usually none, so nothing is installed;
- the repository itself is not installed: steps run in the checkout with `PYTHONPATH` set to
  it, so one cached environment serves every commit with the same dependency files.
The cache key is the SHA-256 of the dependency files, the extras, the host interpreter and
the workflow's device stack; a `.ready` file marks a complete environment, a lock keeps two
slots from building one twice.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from runner.environment import bytecode, interpreter
from runner.environment.interpreter import Interpreter
from runner.environment.requirements import (
    Plan,
    RequirementsError,
    declared_requirements,
    plan_requirements,
)
from runner.environment.sources import PackageSources, not_installed
from workflows.device import Device

DEPENDENCY_FILES = ("pyproject.toml", "setup.cfg", "setup.py")
Log = Callable[[str], None]
NO_DEVICE = Device()  # torch's stack alone: what a caller that names no workflow gets
NO_SOURCES = PackageSources()  # pip's default index


class PythonEnvError(RuntimeError):
    """The environment could not be made; says what failed."""


@dataclass(frozen=True)
class PythonEnv:
    python: Path
    root: Path
    key: str
    installed: tuple[str, ...]  # requirements pip installed when the env was built
    reused: bool  # True when it came from the cache
    notes: tuple[str, ...] = ()  # host versions used where the repository pins others
    bytecode: Path | None = None  # the steps' PYTHONPYCACHEPREFIX, where one was compiled
    host: Interpreter | None = None  # the interpreter the environment was made from


def env_key(
    checkout: Path,
    extras: Sequence[str],
    requirements_files: Sequence[str],
    strict: bool = False,
    host: Interpreter | None = None,
    device: Device = NO_DEVICE,
) -> str:
    digest = hashlib.sha256()
    python = host or interpreter.own()
    # The host's directories too: the environment's .pth lists them, and what they hold decides
    # what is installed; and the device stack, which decides what is never installed and
    # whether bytecode is compiled.
    key = [python.version, str(python.executable), sorted(extras), strict, python.site_dirs,
           sorted(device.host_only_names()), sorted(device.stack())]  # fmt: skip
    digest.update(json.dumps(key).encode())
    for name in (*DEPENDENCY_FILES, *requirements_files):
        path = checkout / name
        digest.update(name.encode() + b"\0")
        digest.update(path.read_bytes() if path.is_file() else b"-")
    return digest.hexdigest()[:24]


def python_env(
    checkout: Path,
    cache: Path,
    *,
    extras: Sequence[str] = ("test",),
    requirements_files: Sequence[str] = ("requirements.txt",),
    strict: bool = False,
    sources: PackageSources = NO_SOURCES,
    log: Log = lambda _: None,
    pip_timeout_s: float = 1800,
    host: Interpreter | None = None,
    device: Device = NO_DEVICE,
) -> PythonEnv:
    """The cached environment for `checkout`'s dependency files on `host` (default: the
    runner's own interpreter) for the workflow's `device` stack, built when absent."""
    host = host or interpreter.own()
    key = env_key(checkout, extras, requirements_files, strict, host, device)
    root, home = cache / key, cache / f"{key}.home"
    python = root / "bin" / "python"
    ready = root / ".ready"
    cache.mkdir(parents=True, exist_ok=True)
    with (cache / f"{key}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready.is_file() and python.exists() and untouched(root):
            built = json.loads(ready.read_text())
            installed = tuple(built.get("installed", []))
            log(f"python environment {key} reused (installed: {', '.join(installed) or 'none'})")
            notes = tuple(built.get("notes", []))
            prefix = env_bytecode(root, python, home, log, host, stack=device.stack())
            return PythonEnv(python, root, key, installed, True, notes, prefix, host)
        try:
            reqs = declared_requirements(checkout, extras, requirements_files)
        except RequirementsError as exc:
            raise PythonEnvError(str(exc)) from exc
        plan = plan_requirements(reqs, strict=strict, host=host, host_only=device.host_only_names())
        missing = _build(root, host, plan, sources, build_env(home), log, pip_timeout_s)
        prefix = env_bytecode(root, python, home, log, host, stack=device.stack())
        ready.write_text(json.dumps({"installed": missing, "notes": list(plan.notes)}))
        log(
            f"python environment {key} built on {host.describe()} "
            f"(installed: {', '.join(missing) or 'none'})"
        )
        return PythonEnv(python, root, key, tuple(missing), False, plan.notes, prefix, host)


def _build(
    root: Path,
    host: Interpreter,
    plan: Plan,
    sources: PackageSources,
    env: dict[str, str],
    log: Log,
    pip_timeout_s: float,
) -> list[str]:
    """The venv at `root` over the host's site directories, with what `plan` installs; the
    requirements pip installed. PythonEnvError, and no venv left, where it cannot be made."""
    if plan.refused:
        raise PythonEnvError(
            f"this host lacks {', '.join(plan.refused)}: the runner never installs torch, "
            "triton or the vendor's packages; install the vendor's build on the host"
        )
    for note in plan.notes:
        log(f"using the host's {note}")
    for seen in plan.outside:
        log(f"not for jobs: {seen} (the runner's own path, which a job does not import from)")
    shutil.rmtree(root, ignore_errors=True)
    python = root / "bin" / "python"
    venv = [str(host.executable), "-m", "venv", "--without-pip", str(root)]
    _run(venv, f"venv ({host.describe()})", 300, env)
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(purelib, "_ondemand_host.pth").write_text("\n".join(host.site_dirs) + "\n")
    missing = list(plan.install)
    if missing and not host.has_pip:
        shutil.rmtree(root, ignore_errors=True)
        raise PythonEnvError(
            f"the job's Python {host.describe()} has no pip, and this host lacks "
            f"{', '.join(missing)}: install pip for it (Debian and Ubuntu: python3-pip), "
            "or install those packages into it"
        )
    if missing:
        log(f"installing what the host lacks from {sources.describe()}: {', '.join(missing)}")
        # pip itself comes from the host through the .pth; it installs into the venv and
        # leaves what the host already provides (torch) alone. Wheels only: no package's
        # own code runs while it is installed (the build runs as the runner).
        argv = [str(python), "-m", "pip", "install", "--only-binary=:all:"]
        argv += ["--retries", "1", "--timeout", "15", *sources.pip_args(), *missing]
        try:
            _run(argv, "pip", pip_timeout_s, env)
        except PythonEnvError as exc:
            shutil.rmtree(root, ignore_errors=True)
            raise PythonEnvError(not_installed(missing, sources, str(exc), plan.outside)) from exc
    return missing


# The environment's bytecode prefix (runner.environment.bytecode), and its record.
BYTECODE = "pycache"


def env_bytecode(
    root: Path,
    python: Path,
    home: Path,
    log: Log,
    host: Interpreter | None = None,
    timeout_s: float = 600,
    stack: frozenset[str] = NO_DEVICE.stack(),
) -> Path | None:
    """The environment's bytecode prefix, compiled on the first call where the host's packages
    lack their own bytecode (`runner.environment.bytecode`: any module of the device `stack`,
    or most packages); None where they have it, or where
    compiling failed (the steps then compile from source, as before). The outcome is recorded
    once, so a reused environment only reads the record."""
    prefix, record = root / BYTECODE, root / f"{BYTECODE}.json"
    try:
        compiled = int(json.loads(record.read_text())["compiled"])
    except (OSError, ValueError, KeyError, TypeError):
        host = host or interpreter.own()
        compiled = 0
        if bytecode.lacks_bytecode(host.site_dirs, cache_tag=host.cache_tag, stack=stack):
            dirs = _bytecode_dirs(root, host)
            compiled = _compile_bytecode(prefix, python, dirs, build_env(home), log, timeout_s)
        record.write_text(json.dumps({"compiled": compiled}))
    return prefix if compiled > 0 else None


def _bytecode_dirs(root: Path, host: Interpreter) -> list[str]:
    """Where a step imports from besides its checkout: the host interpreter's standard
    library and site directories, and the environment's own."""
    own = [str(p) for p in sorted(root.glob("lib/python*/site-packages"))]
    return list(dict.fromkeys([*host.stdlib, *host.site_dirs, *own]))


def _compile_bytecode(
    prefix: Path, python: Path, dirs: list[str], env: dict[str, str], log: Log, timeout_s: float
) -> int:
    """Modules compiled into `prefix`, 0 where compiling failed."""
    shutil.rmtree(prefix, ignore_errors=True)
    started = time.monotonic()
    argv = [str(python), "-I", str(bytecode.SCRIPT), str(prefix), *dirs]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, env=env, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log(f"bytecode for the host's packages not compiled: {exc}")
        return 0
    words = proc.stdout.split()
    if proc.returncode != 0 or not words or not words[0].isdigit():
        log(f"bytecode for the host's packages not compiled: {proc.stderr.strip()[-300:]}")
        return 0
    log(
        f"bytecode for the host's packages (they ship none): {proc.stdout.strip()} in "
        f"{time.monotonic() - started:.1f}s, read by every step"
    )
    return int(words[0])


# What the environment build inherits from the runner: the way to an index (proxies, pip's own
# settings), never the runner's secrets.
BUILD_INHERITED = (
    "PATH",
    "LANG",
    "LC_ALL",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
)
BUILD_PREFIXES = ("PIP_",)


def build_env(home: Path) -> dict[str, str]:
    """The environment of `venv` and `pip` while building a job's Python."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name in BUILD_INHERITED or name.startswith(BUILD_PREFIXES)
    }
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    home.mkdir(parents=True, exist_ok=True)
    env.update(HOME=str(home), PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def untouched(root: Path) -> bool:
    """Whether a cached environment can only have been changed by the runner: owned by it and
    writable by nobody else, at its top, where packages go and where its bytecode is (a job
    runs as another user)."""
    for path in (root, *root.glob("lib/python*/site-packages"), *root.glob(BYTECODE)):
        info = path.lstat()
        if info.st_uid != os.geteuid() or info.st_mode & 0o022:
            return False
    return True


def _run(argv: list[str], what: str, timeout: float, env: dict[str, str]) -> None:
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, check=False, env=env
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise PythonEnvError(f"{what}: {exc}") from exc
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
        raise PythonEnvError(f"{what} exited {proc.returncode}:\n{tail}")
