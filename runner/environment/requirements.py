"""What a repository declares (pyproject's dependencies and extras, requirements files) and
which of it the job's host satisfies: the plan of what the job's environment installs, uses
from the host as it is, or refuses (the device stack, which only the host brings).

Host first: a requirement the host's installed distributions satisfy *by name* is used as it
is, whatever version the repository pins (the report notes `PyYAML 6.0.3 (repository pins
6.0.1)`); a workflow's `python_env.strict` makes pins count. torch, triton and the vendor's
packages (the workflow's `device.host_only`) are never installed or replaced.
"""

from __future__ import annotations

import re
import site
import sys
import tomllib
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from runner.environment.interpreter import Interpreter
from workflows.device import Device, canonical

# Never installed or replaced where no workflow says more: torch's own stack.
DEFAULT_HOST_ONLY = Device().host_only_names()


class RequirementsError(RuntimeError):
    """The repository's dependency files cannot be read; says which and why."""


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
            raise RequirementsError(f"pyproject.toml does not parse: {exc}") from exc
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


def contains(req: Requirement, version: str) -> bool:
    """Whether `version` meets `req` (pre-releases count; a version pip would refuse
    does not)."""
    try:
        return req.specifier.contains(version, prereleases=True)
    except ValueError:  # not a version pip would take either
        return False


def _installed(name: str, dirs: Sequence[str]) -> metadata.Distribution | None:
    return next(iter(metadata.distributions(name=name, path=list(dirs))), None)


def plan_requirements(
    reqs: Sequence[str],
    *,
    strict: bool = False,
    dirs: Sequence[str] | None = None,
    host: Interpreter | None = None,
    host_only: Collection[str] = DEFAULT_HOST_ONLY,
) -> Plan:
    """Which of `reqs` the host satisfies, by name (or, with `strict`, by version too), in
    exactly the directories a job imports from (`dirs`, default the host interpreter's site
    directories), markers evaluated as that interpreter would: a distribution the runner sees
    only through its own PYTHONPATH is not the job's. What is `host_only` (canonical names: the
    workflow's `Device.host_only_names()`) is never installed: refused where the host lacks it."""
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
        hosts_it = canonical(req.name) in host_only
        dist = _installed(req.name, where)
        if dist is None:
            (refused if hosts_it else install).append(text)
            seen = _installed(req.name, elsewhere)
            if seen is not None:
                outside.append(
                    f"{seen.metadata['Name'] or req.name} {seen.version} in {seen.locate_file('')}"
                )
            continue
        if req.specifier and not req.specifier.contains(dist.version, prereleases=True):
            if strict and not hosts_it:
                install.append(text)
            else:
                notes.append(f"{dist.metadata['Name'] or req.name} {dist.version} ({_asks(req)})")
    return Plan(tuple(install), tuple(dict.fromkeys(notes)), tuple(refused), tuple(outside))


def _asks(req: Requirement) -> str:
    pins = [s.version for s in req.specifier if s.operator == "=="]
    return f"repository pins {pins[0]}" if len(pins) == 1 else f"repository asks {req.specifier}"
