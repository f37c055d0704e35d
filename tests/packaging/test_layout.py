"""The layout the architecture document promises: no import cycle inside any package, the
stages of the service and of the runner depending only backwards, and the lab (`tools/`) out of
what is installed."""

from __future__ import annotations

import ast
import functools
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = (
    "service",
    "runner",
    "report",
    "kernels",
    "workflows",
    "sandbox",
    "ondemand",
    "devtools",
)


def modules(package: str) -> Iterator[tuple[str, Path]]:
    for path in sorted((ROOT / package).rglob("*.py")):
        if "migrations" in path.parts:
            continue
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The project modules `path` imports anywhere in its text (under TYPE_CHECKING and inside
    functions too: a cycle hidden that way is still a cycle in the design)."""
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


@functools.cache
def graph() -> dict[str, set[str]]:
    found = {name: path for package in PACKAGES for name, path in modules(package)}
    known = set(found)
    return {name: imports(name, path, known) for name, path in found.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycle() -> None:
    edges = graph()
    # A package's __init__ importing its own modules is how exports work, not a cycle of the
    # design: drop edges from a package to its own submodules.
    inner = {n: {t for t in ts if not t.startswith(n + ".")} for n, ts in edges.items()}
    assert cycles(inner) == []


def test_the_cycle_check_catches_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


# Each stage of the service may use the stages before it, never those after it.
SERVICE_ORDER = (
    "db", "github", "render", "queue", "publish", "history", "changes", "receive", "web",
)  # fmt: skip


@pytest.mark.parametrize("stage", SERVICE_ORDER)
def test_service_stages_depend_only_backwards(stage: str) -> None:
    later = SERVICE_ORDER[SERVICE_ORDER.index(stage) + 1 :]
    edges = graph()
    bad = {
        (module, target)
        for module, targets in edges.items()
        if module.startswith(f"service.{stage}")
        for target in targets
        if any(target.startswith(f"service.{after}") for after in later)
        or target in ("service.app", "service.server")
    }
    assert bad == set()


# The command registry's shared parts; every other module there is one command.
COMMAND_PARTS = ("registry", "scan", "words")


def test_a_command_imports_no_other_command() -> None:
    """A command is one module: it may use the registry's shared parts, never another
    command (so a new command is one module and one registry line)."""
    prefix = "service.receive.commands."
    commands = {
        n for n in graph() if n.startswith(prefix) and n[len(prefix) :] not in COMMAND_PARTS
    }
    assert {"service.receive.commands.test", "service.receive.commands.cancel"} <= commands
    bad = {(m, t) for m in commands for t in graph()[m] if t in commands or t == prefix[:-1]}
    assert bad == set()


# The runner's stages, from the leaves (what runs in the job, the link, what results mean) to
# the daemon; each may use only those before it. Its
# entry points (`runner.cli`, `runner.local`, `runner.doctor`) sit above them all.
RUNNER_ORDER = ("plugins", "link", "results", "environment", "job", "daemon")
ENTRY_POINTS = ("runner.cli", "runner.local", "runner.doctor")


def test_every_runner_module_is_in_a_stage() -> None:
    loose = {
        name for name, _ in modules("runner") if name.count(".") == 1 and name not in ENTRY_POINTS
    }
    assert loose == {f"runner.{stage}" for stage in RUNNER_ORDER}


@pytest.mark.parametrize("stage", RUNNER_ORDER)
def test_runner_stages_depend_only_backwards(stage: str) -> None:
    later = RUNNER_ORDER[RUNNER_ORDER.index(stage) + 1 :]
    bad = {
        (module, target)
        for module, targets in graph().items()
        if module.startswith(f"runner.{stage}")
        for target in targets
        if any(target.startswith(f"runner.{after}") for after in later) or target in ENTRY_POINTS
    }
    assert bad == set()


def test_the_plugins_import_nothing_of_the_project() -> None:
    """They run inside the job's process, from a copy: only pytest and the standard library."""
    used = {t for m, ts in graph().items() if m.startswith("runner.plugins.") for t in ts}
    assert used == set()


def used_by(package: str) -> set[str]:
    """The project modules `package`'s modules import, outside the package itself."""
    return {
        t
        for m, ts in graph().items()
        if m == package or m.startswith(f"{package}.")
        for t in ts
        if t != package and not t.startswith(f"{package}.")
    }


def test_runner_imports_nothing_of_the_service() -> None:
    """The runner renders its report with the `report` package, as the service does; it
    never imports the service (its image holds none)."""
    service = {t for t in used_by("runner") if t.split(".")[0] == "service"}
    assert service == set()
    assert "report.comment" in used_by("runner")


def test_the_report_imports_only_workflows_and_ondemand() -> None:
    """The report is pure and shared: of the project, only the typed contract and the shared
    helpers, never the service or the runner."""
    used = {t.split(".")[0] for t in used_by("report")}
    assert used <= {"workflows", "ondemand"}, used
    assert "workflows" in used


def test_tools_and_tests_are_not_installed() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    names = {pattern.rstrip("*") for pattern in include}
    assert names.isdisjoint({"tools", "tests", "scripts"})
    assert not (ROOT / "scripts").exists() or not any((ROOT / "scripts").iterdir())
    lab_users = [
        str(path.relative_to(ROOT))
        for package in PACKAGES
        for _, path in modules(package)
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Import | ast.ImportFrom)
        and any(
            name.split(".")[0] == "tools"
            for name in (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
            )
        )
    ]
    assert lab_users == []
