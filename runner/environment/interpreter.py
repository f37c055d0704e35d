"""The Python a job's steps run on: the host's interpreter that has the vendor's torch, which
need not be the runner's own.

A vendor's torch may ship for an older CPython (3.10) than the runner needs (3.11 or newer);
so each backend's jobs run on an interpreter of their own (`--python PATH`, or found by
probing the usual places for one that has the workflow's host packages), and everything the
runner asks of it (its version, site directories, standard library, bytecode tag, the
markers a requirement is evaluated with) comes from running that interpreter once, never from
the runner's own `sys`. The probe uses the standard library only and runs on any CPython 3.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ENV = "ONDEMAND_JOB_PYTHON"  # the runner's setting: PATH or BACKEND=PATH, comma-separated
# Jobs need at least this (what runs inside a job is tested on it); older ones are refused.
MIN_VERSION = (3, 10)

# Runs with `-E` (no PYTHONPATH: what the runner sees only through it is not the job's) from
# `/` (nothing of a working directory); the user's site directory counts, as it does for the
# runner's own. Prints one JSON object. `find_spec` looks for a package without importing it
# (no device is initialized).
_PROBE = r"""
import json, os, platform, site, sys, sysconfig
from importlib import util

def dirs():
    found = list(site.getsitepackages())
    if site.ENABLE_USER_SITE and site.getusersitepackages():
        found.append(site.getusersitepackages())
    found += [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]
    seen = []
    for d in found:
        if d not in seen and os.path.isdir(d):
            seen.append(d)
    return seen

modules = {}
for name in sys.argv[1:]:
    try:
        modules[name] = util.find_spec(name) is not None
    except (ImportError, ValueError):
        modules[name] = False
paths = sysconfig.get_paths()
print(json.dumps({
    "executable": sys.executable,
    "version": platform.python_version(),
    "version_info": list(sys.version_info[:2]),
    "implementation": sys.implementation.name,
    "cache_tag": sys.implementation.cache_tag,
    "site_dirs": dirs(),
    "stdlib": [paths["stdlib"], paths["platstdlib"]],
    "path": [p for p in sys.path if p],
    "markers": {
        "implementation_name": sys.implementation.name,
        "implementation_version": platform.python_version(),
        "os_name": os.name,
        "platform_machine": platform.machine(),
        "platform_python_implementation": platform.python_implementation(),
        "platform_release": platform.release(),
        "platform_system": platform.system(),
        "platform_version": platform.version(),
        "python_full_version": platform.python_version(),
        "python_version": ".".join(platform.python_version_tuple()[:2]),
        "sys_platform": sys.platform,
    },
    "modules": modules,
    "has_venv": util.find_spec("venv") is not None,
    "has_pip": util.find_spec("pip") is not None,
}))
"""

# Where a host's Python with the vendor's torch usually is, after the runner's own and PATH's
# `python3`: versioned names on PATH, then the usual prefixes of vendor images.
_VERSIONED = [f"python3.{minor}" for minor in range(14, 8, -1)]
_PREFIXES = ("/usr/bin", "/usr/local/bin", "/opt/conda/bin", "/opt/python/bin")


class InterpreterError(RuntimeError):
    """A job interpreter that cannot be used (or none found): says which and why."""


@dataclass(frozen=True)
class Interpreter:
    """A Python as it describes itself. `executable` is the path it was asked by (a
    virtual environment's `python` stays that, not the base it links to)."""

    executable: Path
    version: str
    version_info: tuple[int, int]
    cache_tag: str
    site_dirs: tuple[str, ...]
    stdlib: tuple[str, ...]
    path: tuple[str, ...]
    markers: Mapping[str, str]
    modules: Mapping[str, bool]
    has_venv: bool = True
    has_pip: bool = True

    @property
    def own(self) -> bool:
        """Whether this is the runner's own interpreter."""
        return _same_file(self.executable, Path(sys.executable))

    def lacks(self, modules: Iterable[str]) -> list[str]:
        """Of `modules`, those this interpreter cannot import."""
        return [m for m in modules if not self.modules.get(m, False)]

    def describe(self) -> str:
        """`/usr/bin/python3.10 (CPython 3.10.12)`, for logs and the report."""
        return f"{self.executable} (Python {self.version})"


def _same_file(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return False


def probe(
    executable: Path | str, modules: Sequence[str] = (), timeout_s: float = 60
) -> Interpreter:
    """Ask `executable` what it is and which of `modules` it can import (without importing
    them); InterpreterError when it cannot be run, does not answer, or is too old."""
    argv = [str(executable), "-E", "-c", _PROBE, *modules]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout_s, cwd="/", check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InterpreterError(f"{executable}: cannot run it: {exc}") from exc
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
        raise InterpreterError(f"{executable}: not a Python that answers the probe: {why}")
    try:
        data = json.loads(lines[-1])
    except ValueError as exc:
        raise InterpreterError(f"{executable}: the probe's answer does not parse") from exc
    found = Interpreter(
        executable=Path(executable),
        version=str(data["version"]),
        version_info=(int(data["version_info"][0]), int(data["version_info"][1])),
        cache_tag=str(data["cache_tag"]),
        site_dirs=tuple(data["site_dirs"]),
        stdlib=tuple(dict.fromkeys(data["stdlib"])),
        path=tuple(data["path"]),
        markers=dict(data["markers"]),
        modules={str(k): bool(v) for k, v in data["modules"].items()},
        has_venv=bool(data["has_venv"]),
        has_pip=bool(data["has_pip"]),
    )
    if found.version_info < MIN_VERSION:
        low = ".".join(map(str, MIN_VERSION))
        raise InterpreterError(f"{found.describe()}: jobs need Python {low} or newer")
    if not found.has_venv:
        raise InterpreterError(
            f"{found.describe()}: has no venv module (Debian and Ubuntu: install python3-venv "
            "for that version)"
        )
    return found


_OWN: dict[tuple[str, ...], Interpreter] = {}


def own(modules: Sequence[str] = ()) -> Interpreter:
    """The runner's own interpreter (probed once per set of modules)."""
    key = tuple(modules)
    if key not in _OWN:
        _OWN[key] = probe(sys.executable, modules)
    return _OWN[key]


def candidates(search_path: str | None = None) -> list[Path]:
    """Where to look for a host's Python, in order: the runner's own, `python3` and the
    versioned names on PATH, then the usual prefixes of vendor images; each file once."""
    found: list[Path] = [Path(sys.executable)]
    path = os.environ.get("PATH", "") if search_path is None else search_path
    for name in ("python3", *_VERSIONED):
        where = shutil.which(name, path=path)
        if where:
            found.append(Path(where))
    for prefix in _PREFIXES:
        for name in ("python3", *_VERSIONED):
            candidate = Path(prefix) / name
            if candidate.is_file() and os.access(candidate, os.X_OK):
                found.append(candidate)
    unique: list[Path] = []
    for candidate in found:
        if not any(_same_file(candidate, seen) for seen in unique):
            unique.append(candidate)
    return unique


def find(
    modules: Sequence[str],
    given: Path | str | None = None,
    search: Iterable[Path] | None = None,
) -> tuple[Interpreter, str]:
    """The interpreter a backend's jobs run on, and how it was chosen: `given` (it must work
    and have `modules`), else the first of `search` (default `candidates()`) that has every
    one of `modules`. InterpreterError names what was tried and why each was passed over."""
    if given is not None:
        chosen = probe(given, modules)
        missing = chosen.lacks(modules)
        if missing:
            raise InterpreterError(
                f"{chosen.describe()} cannot import {', '.join(missing)}: give the Python "
                "that has the vendor's torch (--python or ONDEMAND_JOB_PYTHON)"
            )
        return chosen, "as configured"
    tried: list[str] = []
    for candidate in candidates() if search is None else search:
        try:
            found = probe(candidate, modules)
        except InterpreterError as exc:
            tried.append(str(exc))
            continue
        missing = found.lacks(modules)
        if not missing:
            return found, "found by probing"
        tried.append(f"{found.describe()} lacks {', '.join(missing)}")
    raise InterpreterError(
        f"no Python on this host can import {', '.join(modules)} (tried: {'; '.join(tried)}); "
        "give it with --python PATH or ONDEMAND_JOB_PYTHON"
    )


def parse_choices(values: Iterable[str], backends: Iterable[str]) -> dict[str, Path]:
    """`--python` values (`PATH` for every backend, `BACKEND=PATH` for one; a comma-separated
    list in ONDEMAND_JOB_PYTHON) → backend → path. ValueError for a backend it does not serve."""
    known = list(backends)
    chosen: dict[str, Path] = {}
    for value in values:
        for part in (p.strip() for p in value.split(",")):
            if not part:
                continue
            backend, sep, path = part.partition("=")
            if not sep:
                chosen.update({b: Path(part) for b in known if b not in chosen})
                continue
            if backend.strip() not in known:
                raise ValueError(
                    f"--python {part}: this runner serves no backend {backend.strip()!r} "
                    f"(it serves {', '.join(known)})"
                )
            chosen[backend.strip()] = Path(path.strip())
    return chosen


def add_argument(parser: argparse.ArgumentParser) -> None:
    """`--python`: the Python the jobs run on (`ondemand runner`, `ondemand run`)."""
    parser.add_argument(
        "--python",
        action="append",
        default=[],
        metavar="[BACKEND=]PATH",
        help="the Python jobs run on: the host's, with the vendor's torch (e.g. the CPython "
        "3.10 its packages ship for); BACKEND=PATH for one backend (repeat). Default "
        f"${ENV} (comma-separated), else the first Python found that imports the workflow's "
        "host modules: the runner's own, python3 and python3.X on PATH, then /usr/bin, "
        "/usr/local/bin, /opt/conda/bin",
    )


def configured(values: Sequence[str], backends: Iterable[str]) -> dict[str, Path]:
    """The `--python` choices, else $ONDEMAND_JOB_PYTHON's, by backend (ValueError if bad)."""
    chosen = list(values) or [v for v in [os.environ.get(ENV, "")] if v.strip()]
    return parse_choices(chosen, backends)
