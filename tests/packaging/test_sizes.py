"""The house's size rule for what is installed and read most: no module in `service/`,
`runner/`, `workflows/` or `report/` over 500 lines, no function there over 80 (a nested
function counts toward the one that holds it: a router factory is one function)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("service", "runner", "workflows", "report")
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80


def sources() -> list[Path]:
    return [
        path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "migrations" not in path.parts
    ]


def long_functions(tree: ast.AST, limit: int) -> list[tuple[str, int]]:
    """The functions of `tree` longer than `limit` lines, outermost only (a nested one counts
    in its holder), with their lengths."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                length = (child.end_lineno or child.lineno) - child.lineno + 1
                if length > limit:
                    found.append((child.name, length))
            else:
                visit(child)

    visit(tree)
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_no_module_over_500_lines(package: str) -> None:
    long = {
        str(p.relative_to(ROOT)): n
        for p in sources()
        if p.relative_to(ROOT).parts[0] == package
        and (n := len(p.read_text().splitlines())) > MAX_FILE_LINES
    }
    assert long == {}


@pytest.mark.parametrize("package", PACKAGES)
def test_no_function_over_80_lines(package: str) -> None:
    long = {
        f"{p.relative_to(ROOT)}::{name}": n
        for p in sources()
        if p.relative_to(ROOT).parts[0] == package
        for name, n in long_functions(ast.parse(p.read_text()), MAX_FUNCTION_LINES)
    }
    assert long == {}


def test_the_function_rule_counts_a_nested_function_in_its_holder() -> None:
    inner = "\n".join(f"        x{i} = {i}" for i in range(80))
    tree = ast.parse(f"def outer():\n    def inner():\n{inner}\n    return inner\n")
    assert long_functions(tree, 80) == [("outer", 83)]
    assert long_functions(tree, 83) == []
