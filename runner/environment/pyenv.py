"""The job's Python environment: the host's torch and vendor plugin, plus what the repository
declares and the host lacks; cached by the hash of the repository's dependency files.

The host is the job's interpreter (`runner.environment.interpreter`): the Python with the
vendor's torch, which may be another than the runner's own (CPython 3.10 beside torch_musa
while the runner runs on 3.12). Everything here asks that interpreter, never the runner's `sys`.

Host first: a requirement the host's installed distributions satisfy *by name* is used as it
is, whatever version the repository pins (the report notes `PyYAML 6.0.3 (repository pins
6.0.1)`); a workflow's `python_env.strict` makes pins count. torch, triton and the vendor's
plugin are never installed or replaced: GPU hosts bring their own. What is missing is
installed from the runner's wheelhouse and/or index (`PackageSources`), wheels only; when it
cannot be, the environment step says which packages and which runner setting would fix it.

The scheme, chosen to be quick and to never reinstall torch:
- a venv (the host's `python -m venv --without-pip`, milliseconds) whose `_ondemand_host.pth`
  lists the host interpreter's site-packages directories, so torch, triton and torch_musa
  (which comes with the MUSA stack, not from an index) import from the host. Only the
  directory lines are added: the host's `.pth` hooks (editable installs of other projects) do
  not run;
- the repository's requirements (`project.dependencies`, the workflow's extras, its
  requirements files) that the host does not already satisfy are `pip install`ed into the
  venv — usually none, so nothing is installed;
- the repository itself is not installed: steps run in the checkout with `PYTHONPATH` set to
  it, so one cached environment serves every commit with the same dependency files.
The cache key is the SHA-256 of the dependency files, the extras and the host interpreter; a
`.ready` file marks a complete environment, a lock keeps two slots from building one twice.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shutil
import site
import subprocess
import sys
import time
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from runner.environment import bytecode, interpreter
from runner.environment.interpreter import Interpreter

DEPENDENCY_FILES = ("pyproject.toml", "setup.cfg", "setup.py")
Log = Callable[[str], None]


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


def host_site_dirs() -> list[str]:
    """The runner's own site-packages directories (and any in sys.path named so); a job's are
    its interpreter's (`Interpreter.site_dirs`), which the same code finds in that Python."""
    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE and site.getusersitepackages():
        dirs.append(site.getusersitepackages())
    dirs += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    seen: list[str] = []
    for d in dirs:
        if d not in seen and Path(d).is_dir():
            seen.append(d)
    return seen


def _requirement_lines(path: Path) -> list[str]:
    lines = []
    for raw in path.read_text(errors="replace").splitlines():
        line = raw.split(" #", 1)[0].strip()
        if line and not line.startswith(("#", "-")):
            lines.append(line)
    return lines


def declared_requirements(
    checkout: Path, extras: Sequence[str], requirements_files: Sequence[str]
) -> list[str]:
    """The repository's requirements: pyproject's dependencies and chosen extras, and the
    requirements files that exist."""
    reqs: list[str] = []
    pyproject = checkout / "pyproject.toml"
    if pyproject.is_file():
        try:
            project = tomllib.loads(pyproject.read_text()).get("project", {})
        except tomllib.TOMLDecodeError as exc:
            raise PythonEnvError(f"pyproject.toml does not parse: {exc}") from exc
        reqs += list(project.get("dependencies", []))
        optional = project.get("optional-dependencies", {})
        own = str(project.get("name", "")).lower()
        pending = list(extras)
        done: set[str] = set()
        while pending:
            extra = pending.pop()
            if extra in done:
                continue
            done.add(extra)
            for req in optional.get(extra, []):
                # `name[other]` on the project itself pulls in another extra.
                match = re.match(r"^([A-Za-z0-9_.-]+)\[([^\]]+)\]\s*$", req)
                if match and match.group(1).lower() == own:
                    pending += [e.strip() for e in match.group(2).split(",")]
                else:
                    reqs.append(req)
    for name in requirements_files:
        path = checkout / name
        if path.is_file():
            reqs += _requirement_lines(path)
    return reqs


# Never installed or replaced, whatever a repository asks: the host's device stack.
HOST_ONLY = frozenset({"torch", "triton", "torch-musa", "pytorch-triton"})


@dataclass(frozen=True)
class PackageSources:
    """Where the environment build may get what the host lacks (runner settings)."""

    wheelhouse: Path | None = None
    index_url: str | None = None

    def pip_args(self) -> list[str]:
        args: list[str] = []
        if self.index_url:
            args += ["--index-url", self.index_url]
        elif self.wheelhouse is not None:
            args.append("--no-index")
        if self.wheelhouse is not None:
            args += ["--find-links", str(self.wheelhouse)]
        return args

    @staticmethod
    def add_arguments(parser: argparse.ArgumentParser) -> None:
        """`--wheelhouse` and `--index-url` (or ONDEMAND_WHEELHOUSE, ONDEMAND_INDEX_URL)."""
        parser.add_argument(
            "--wheelhouse",
            type=Path,
            default=os.environ.get("ONDEMAND_WHEELHOUSE") or None,
            help="a directory of wheels for what a repository needs and the host lacks "
            "(alone: no index is asked; for offline hosts)",
        )
        parser.add_argument(
            "--index-url",
            default=os.environ.get("ONDEMAND_INDEX_URL") or None,
            help="the package index the environment build may use",
        )

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> PackageSources:
        return cls(wheelhouse=args.wheelhouse, index_url=args.index_url)

    def lacking(self, reqs: Sequence[str]) -> tuple[str, ...]:
        """Of `reqs`, those no wheel in the wheelhouse satisfies by name and version (pip
        still checks the platform tags). With an index, or no wheelhouse, none is known."""
        if self.index_url or self.wheelhouse is None:
            return ()
        held: dict[str, list[str]] = {}
        for wheel in self.wheelhouse.glob("*.whl"):
            parts = wheel.name.split("-")
            if len(parts) >= 5:
                held.setdefault(_canonical(parts[0]), []).append(parts[1])
        lacking = []
        for line in reqs:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                lacking.append(line)
                continue
            versions = held.get(_canonical(req.name), [])
            if not any(_contains(req, v) for v in versions):
                lacking.append(line)
        return tuple(lacking)

    def describe(self) -> str:
        found = [f"wheelhouse {self.wheelhouse}"] if self.wheelhouse else []
        found += [f"index {self.index_url}"] if self.index_url else []
        return " and ".join(found) or "pip's default index"


@dataclass(frozen=True)
class Plan:
    """What the environment adds to the host: `install` (missing requirements), `notes` (the
    host's version used where the repository pins another), `refused` (host-only packages
    the host lacks)."""

    install: tuple[str, ...]
    notes: tuple[str, ...]
    refused: tuple[str, ...]
    # Of `install`, those the runner itself can import from elsewhere (its PYTHONPATH), which
    # no job imports from: "pydantic 2.14.4 in /opt/site".
    outside: tuple[str, ...] = ()


def _contains(req: Requirement, version: str) -> bool:
    try:
        return req.specifier.contains(version, prereleases=True)
    except ValueError:  # not a version pip would take either
        return False


_NOT_FOUND = re.compile(r"No matching distribution found for (\S+)")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _installed(name: str, dirs: Sequence[str]) -> metadata.Distribution | None:
    return next(iter(metadata.distributions(name=name, path=list(dirs))), None)


def plan_requirements(
    reqs: Sequence[str],
    *,
    strict: bool = False,
    dirs: Sequence[str] | None = None,
    host: Interpreter | None = None,
) -> Plan:
    """Which of `reqs` the host satisfies, by name (or, with `strict`, by version too), in
    exactly the directories a job imports from (`dirs`, default the host interpreter's site
    directories), markers evaluated as that interpreter would: a distribution the runner sees
    only through its own PYTHONPATH is not the job's."""
    if dirs is not None:
        where = list(dirs)
    elif host is not None:
        where = list(host.site_dirs)
    else:
        where = host_site_dirs()
    markers = dict(host.markers) if host is not None else None
    # Where the runner itself (or the job's interpreter) would find what the job's directories
    # lack: PYTHONPATH, which a job does not import from.
    elsewhere = list(host.path) if host is not None and not host.own else sys.path
    install: list[str] = []
    notes: list[str] = []
    refused: list[str] = []
    outside: list[str] = []
    for text in reqs:
        try:
            req = Requirement(text)
        except InvalidRequirement:
            install.append(text)  # pip will say what is wrong with it
            continue
        if req.marker is not None and not req.marker.evaluate(markers):
            continue
        host_only = _canonical(req.name) in HOST_ONLY
        dist = _installed(req.name, where)
        if dist is None:
            (refused if host_only else install).append(text)
            seen = _installed(req.name, elsewhere)
            if seen is not None:
                outside.append(f"{seen.metadata['Name'] or req.name} {seen.version} in "
                               f"{seen.locate_file('')}")
            continue
        if req.specifier and not req.specifier.contains(dist.version, prereleases=True):
            if strict and not host_only:
                install.append(text)
            else:
                notes.append(f"{dist.metadata['Name'] or req.name} {dist.version} ({_asks(req)})")
    return Plan(tuple(install), tuple(dict.fromkeys(notes)), tuple(refused), tuple(outside))


def _asks(req: Requirement) -> str:
    pins = [s.version for s in req.specifier if s.operator == "=="]
    return f"repository pins {pins[0]}" if len(pins) == 1 else f"repository asks {req.specifier}"


def env_key(
    checkout: Path,
    extras: Sequence[str],
    requirements_files: Sequence[str],
    strict: bool = False,
    host: Interpreter | None = None,
) -> str:
    digest = hashlib.sha256()
    python = host or interpreter.own()
    # The host's directories too: the environment's .pth lists them, and what they hold decides
    # what is installed.
    key = [python.version, str(python.executable), sorted(extras), strict, python.site_dirs]
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
    sources: PackageSources = PackageSources(),
    log: Log = lambda _: None,
    pip_timeout_s: float = 1800,
    host: Interpreter | None = None,
) -> PythonEnv:
    """The cached environment for `checkout`'s dependency files on `host` (default: the
    runner's own interpreter), built when absent."""
    host = host or interpreter.own()
    key = env_key(checkout, extras, requirements_files, strict, host)
    root = cache / key
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
            prefix = env_bytecode(root, python, cache / f"{key}.home", log, host)
            return PythonEnv(python, root, key, installed, True, notes, prefix, host)
        plan = plan_requirements(
            declared_requirements(checkout, extras, requirements_files), strict=strict, host=host
        )
        if plan.refused:
            raise PythonEnvError(
                f"this host lacks {', '.join(plan.refused)}: the runner never installs torch, "
                "triton or the vendor's plugin; install the vendor's build on the host"
            )
        for note in plan.notes:
            log(f"using the host's {note}")
        for seen in plan.outside:
            log(f"not for jobs: {seen} (the runner's own path, which a job does not import from)")
        shutil.rmtree(root, ignore_errors=True)
        env = build_env(cache / f"{key}.home")
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
                why = _not_installed(missing, sources, str(exc), plan.outside)
                raise PythonEnvError(why) from exc
        prefix = env_bytecode(root, python, cache / f"{key}.home", log, host)
        ready.write_text(json.dumps({"installed": missing, "notes": list(plan.notes)}))
        log(
            f"python environment {key} built on {host.describe()} "
            f"(installed: {', '.join(missing) or 'none'})"
        )
        return PythonEnv(python, root, key, tuple(missing), False, plan.notes, prefix, host)


# The environment's bytecode prefix (runner.environment.bytecode), and its record.
BYTECODE = "pycache"


def env_bytecode(
    root: Path,
    python: Path,
    home: Path,
    log: Log,
    host: Interpreter | None = None,
    timeout_s: float = 600,
) -> Path | None:
    """The environment's bytecode prefix, compiled on the first call where the host's packages
    lack their own bytecode (`runner.environment.bytecode`); None where they have it, or where
    compiling failed (the steps then compile from source, as before). The outcome is recorded
    once, so a reused environment only reads the record."""
    prefix, record = root / BYTECODE, root / f"{BYTECODE}.json"
    try:
        compiled = int(json.loads(record.read_text())["compiled"])
    except (OSError, ValueError, KeyError, TypeError):
        host = host or interpreter.own()
        compiled = 0
        if bytecode.lacks_bytecode(host.site_dirs, cache_tag=host.cache_tag):
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


def _not_installed(
    missing: Sequence[str], sources: PackageSources, pip_output: str, outside: Sequence[str] = ()
) -> str:
    """Why the environment step failed: the requirements no source holds, first, with the
    runner setting that fixes it (and where the runner alone sees them); then pip's own last
    lines."""
    known = sources.lacking(missing)  # what the wheelhouse surely lacks, read before pip
    absent = known or tuple(_NOT_FOUND.findall(pip_output)) or tuple(missing)
    them = "it" if len(absent) == 1 else "them"
    others = [m for m in missing if m not in absent]
    held = "which it holds" if known else "which pip stopped before"
    also = f" (the host also lacks {', '.join(others)}, {held})" if others else ""
    return (
        f"missing on this host and in {sources.describe()}: {', '.join(absent)}{also}. "
        f"Put {'its wheel' if len(absent) == 1 else 'their wheels'} in the runner's wheelhouse "
        f"(--wheelhouse DIR or ONDEMAND_WHEELHOUSE), or let it reach an index that has {them} "
        f"(--index-url URL or ONDEMAND_INDEX_URL).{_outside(outside)}\n{pip_output}"
    )


def _outside(seen: Sequence[str]) -> str:
    if not seen:
        return ""
    return (f" The runner itself imports {', '.join(seen)} through its own path (PYTHONPATH), "
            "which jobs do not see: install it into the host's site-packages, or give the wheel.")


# What the environment build inherits from the runner: the way to an index (proxies, pip's own
# settings), never the runner's secrets.
BUILD_INHERITED = ("PATH", "LANG", "LC_ALL", "http_proxy", "https_proxy", "no_proxy",
                   "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE")
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
