"""Each image installs what its entry points import. No engine runs here: what a stage installs
is read from its `pip install` lines, with pyproject.toml's extras and the requirements of the
distributions installed here; the entry points are then imported in a subprocess that hides
every other distribution, and the project's modules they load are read for the imports they
make only when called (the comparison's scipy)."""

from __future__ import annotations

import ast
import functools
import json
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Iterable
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = canonicalize_name(PYPROJECT["project"]["name"])
PROJECT_PACKAGES = sorted(
    p.rstrip("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]
)
ENTRY_POINTS = {"runner": ["runner.cli"], "service": ["service.server", "service.app"]}
# pip options that take no value; another option would make this reading wrong, so it fails.
PIP_FLAGS = {"--no-deps", "--no-cache-dir", "-q", "--quiet", "-U", "--upgrade"}

HIDDEN_IMPORT = """\
import importlib, json, re, sys
from importlib.abc import MetaPathFinder
from importlib.metadata import packages_distributions

allowed, project = set(json.loads(sys.argv[1])), set(json.loads(sys.argv[2]))
owners = packages_distributions()

class Hide(MetaPathFinder):
    def find_spec(self, fullname, path=None, target=None):
        top = fullname.partition(".")[0]
        if top in sys.stdlib_module_names or top in project:
            return None
        dists = {re.sub(r"[-_.]+", "-", d).lower() for d in owners.get(top, ())}
        if dists and not dists & allowed:
            raise ModuleNotFoundError(f"hidden: {top} ({', '.join(sorted(dists))})", name=top)
        return None

sys.meta_path.insert(0, Hide())
for name in sys.argv[3:]:
    importlib.import_module(name)
"""

LOADED = """\
import importlib, json, sys
project = set(json.loads(sys.argv[1]))
for name in sys.argv[2:]:
    importlib.import_module(name)
print(json.dumps(sorted(
    m.__file__ for n, m in list(sys.modules.items())
    if n.partition(".")[0] in project and getattr(m, "__file__", None)
)))
"""


def stages(dockerfile: str) -> dict[str, str]:
    """Each stage's text by its name."""
    parts = re.split(r"^FROM \S+ AS (\w+)$", dockerfile, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def pip_installs(stage: str) -> list[list[str]]:
    """The arguments of each `pip install` the stage's RUN instructions make."""
    found: list[list[str]] = []
    for run in re.findall(r"^RUN ((?:.*\\\n)*.*)$", stage, re.M):
        lexer = shlex.shlex(run.replace("\\\n", " "), posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
        for i, token in enumerate(tokens[:-1]):
            if re.fullmatch(r"(\S*/)?pip3?", token) and tokens[i + 1] == "install":
                args: list[str] = []
                for arg in tokens[i + 2 :]:
                    if arg in {"&&", "||", ";", "|"}:
                        break
                    args.append(arg)
                found.append(args)
    return found


def closure(requirements: Iterable[Requirement]) -> set[str]:
    """The distributions these requirements install, by the metadata of those installed here."""
    names: set[str] = set()
    seen: set[tuple[str, frozenset[str]]] = set()
    queue = list(requirements)
    while queue:
        req = queue.pop()
        name = canonicalize_name(req.name)
        if (name, frozenset(req.extras)) in seen:
            continue
        seen.add((name, frozenset(req.extras)))
        names.add(name)
        try:
            requires = metadata.requires(req.name) or []
        except metadata.PackageNotFoundError:
            continue
        for text in requires:
            dep = Requirement(text)
            extras = [*req.extras, ""]
            if dep.marker is None or any(dep.marker.evaluate({"extra": e}) for e in extras):
                queue.append(dep)
    return names


def installed_by(stage: str) -> set[str]:
    """The distributions the stage's `pip install` lines install: the project (`.[extras]`,
    as pyproject.toml declares it) and named requirements, each with its dependencies unless
    `--no-deps`."""
    project = PYPROJECT["project"]
    names: set[str] = set()
    for args in pip_installs(stage):
        no_deps = "--no-deps" in args
        for arg in args:
            if arg.startswith("-"):
                assert arg in PIP_FLAGS, f"this test does not know pip's {arg}"
                continue
            local = re.fullmatch(r"\.(?:\[([\w,-]+)\])?", arg)
            if local:
                extras = [e for e in (local.group(1) or "").split(",") if e]
                texts = project["dependencies"] + [
                    r for e in extras for r in project["optional-dependencies"][e]
                ]
                names.add(PROJECT)
                requirements = [Requirement(t) for t in texts]
            else:
                requirements = [Requirement(arg)]
            if no_deps:
                names |= {canonicalize_name(r.name) for r in requirements if not local}
            else:
                names |= closure(requirements)
    return names


@functools.cache
def loaded_project_files(modules: tuple[str, ...]) -> list[str]:
    """The files of the project's modules that importing `modules` loads."""
    done = subprocess.run(
        [sys.executable, "-c", LOADED, json.dumps(PROJECT_PACKAGES), *modules],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def lazy_imports(files: Iterable[str]) -> dict[str, set[str]]:
    """Third-party top-level modules the files import anywhere (inside functions too), with
    the files that do."""
    found: dict[str, set[str]] = {}
    for file in files:
        for node in ast.walk(ast.parse(Path(file).read_text(), file)):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.partition(".")[0]
                if top not in sys.stdlib_module_names and top not in PROJECT_PACKAGES:
                    found.setdefault(top, set()).add(str(Path(file).relative_to(ROOT)))
    return found


def missing(stage: str, modules: list[str]) -> dict[str, str]:
    """What `modules` import that the stage does not install: module → why it is needed."""
    allowed = installed_by(stage)
    owners = metadata.packages_distributions()
    gaps: dict[str, str] = {}
    for top, files in lazy_imports(loaded_project_files(tuple(modules))).items():
        dists = {canonicalize_name(d) for d in owners.get(top, [top])}
        if not dists & allowed:
            gaps[top] = f"imported by {', '.join(sorted(files))}"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            HIDDEN_IMPORT,
            json.dumps(sorted(allowed)),
            json.dumps(PROJECT_PACKAGES),
            *modules,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        hidden = re.search(r"hidden: (\S+) (.*)", done.stderr)
        top = hidden.group(1) if hidden else "?"
        last = done.stderr.strip().splitlines()[-1:] or ["no error message"]
        gaps.setdefault(top, f"import {' '.join(modules)} fails: {last[0]}")
    return gaps


def dockerfile_stages() -> dict[str, str]:
    return stages((ROOT / "Dockerfile").read_text())


@pytest.mark.parametrize("target", sorted(ENTRY_POINTS))
def test_each_image_installs_what_its_entry_points_import(target: str) -> None:
    assert missing(dockerfile_stages()[target], ENTRY_POINTS[target]) == {}


def test_the_runner_image_installs_no_gpu_stack() -> None:
    """torch and triton come from the runner's base image, matched to its driver."""
    installed = installed_by(dockerfile_stages()["runner"])
    assert {"numpy", "scipy", "httpx", "pydantic", PROJECT} <= installed
    assert not {"torch", "triton", "torch-musa"} & installed


def test_a_runner_stage_that_misses_an_import_is_caught() -> None:
    """The runner stage as it was before it installed the `runner` extra: no numpy (imported
    when runner.cli is) and no scipy (imported only when a comparison is judged)."""
    before = (
        'RUN pip install --no-deps . && pip install "pydantic>=2.6" "pyyaml>=6" '
        '"httpx>=0.27" "rich>=13" "packaging>=23" "pytest>=8"'
    )
    runner = dockerfile_stages()["runner"]
    installs = re.findall(r"^RUN pip install .*$", runner, re.M)
    assert len(installs) == 1
    gaps = missing(runner.replace(installs[0], before), ENTRY_POINTS["runner"])
    assert set(gaps) == {"numpy", "scipy"}, gaps
    assert "runner/job/kinds/benchmark/stats.py" in gaps["scipy"]
