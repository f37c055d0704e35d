"""The registry and what follows from it: exports, dispatch, registration, benchmark
discovery, pytest markers; and the package's import structure."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest
import torch

import kernels
from kernels import registry, runtime
from kernels.benchmark.definition import KNOWN_OPS, load

pytestmark = [pytest.mark.adaptive_max_pool3d, pytest.mark.adaptive_max_pool3d_backward]

PACKAGE = Path(kernels.__file__).parent


def test_every_operator_is_exported_and_dispatched() -> None:
    for op in registry.OPERATORS:
        exported = getattr(kernels, op.name)
        assert exported.__doc__ == op.doc and op.name in kernels.__all__
        generic = runtime.function(op.name, "generic")
        assert generic is getattr(importlib.import_module(op.module), op.name)
    assert tuple(op.name for op in registry.OPERATORS) == runtime.OPERATORS
    assert tuple(v.name for v in registry.VENDORS) == runtime.VENDORS


def test_every_aten_operator_is_registered_while_enabled() -> None:
    names = [op.aten for op in registry.OPERATORS if op.aten]
    with kernels.use_kernels():
        for name in names:
            key = runtime.dispatch_key()
            assert torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", key)


def test_the_benchmark_finds_each_definition_through_the_registry() -> None:
    assert tuple(op.name for op in registry.OPERATORS if op.benchmark) == KNOWN_OPS
    for name in KNOWN_OPS:
        assert load(name).name == name
    with pytest.raises(ValueError, match="no benchmark for operator 'nope'"):
        load("nope")


def test_every_operator_is_a_registered_marker(pytestconfig: pytest.Config) -> None:
    markers = {line.split(":")[0] for line in pytestconfig.getini("markers")}
    assert {op.name for op in registry.OPERATORS} <= markers


def test_vendors_are_found_by_name_and_device() -> None:
    assert registry.VENDORS[-1].name == "cpu", "cpu is the fallback: detected last"
    assert registry.vendor_of_device("cuda").name == "nvidia"
    assert registry.vendor_of_device("musa").dispatch_key == "PrivateUse1"
    assert registry.vendor_of_device("xpu").name == "cpu"
    with pytest.raises(ValueError, match="unknown vendor 'acme'"):
        registry.vendor("acme")
    for vendor in registry.VENDORS:  # each has a backend package with its heuristics
        assert importlib.util.find_spec(f"{vendor.package}.heuristics") is not None


def imports_of(path: Path) -> set[str]:
    """The `kernels` modules a source file imports at its top level (not inside functions)."""
    tree = ast.parse(path.read_text())
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_the_package_has_no_import_cycles_and_does_not_import_tools() -> None:
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {
        name: {m for m in imports_of(path) if m in modules and m != name}
        for name, path in modules.items()
    }
    for name, path in modules.items():
        assert not any(m.split(".")[0] == "tools" for m in imports_of(path)), name
    # A package imports its parent package first, which is no cycle: drop those edges.
    for name, deps in graph.items():
        graph[name] = {d for d in deps if not name.startswith(d + ".")}
    state: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> None:
        if state.get(name) == 2:
            return
        assert state.get(name) != 1, f"import cycle: {' -> '.join([*trail, name])}"
        state[name] = 1
        for dep in sorted(graph[name]):
            visit(dep, [*trail, name])
        state[name] = 2

    for name in sorted(graph):
        visit(name, [])


def test_the_registry_imports_nothing_that_could_cycle() -> None:
    """tests/conftest.py loads it without the package, so it may import only the stdlib."""
    imported = imports_of(PACKAGE / "registry.py")
    assert imported <= {"__future__", "__future__.annotations", "dataclasses",
                        "dataclasses.dataclass"}  # fmt: skip
