"""Which operators a change touches (`workflows.changes.select`), on written trees of both
layouts: own files, shared code through the import graph, the tests whose lines changed,
renames, and what touches nothing."""

from __future__ import annotations

from workflows.changes import (
    Changed,
    Rule,
    apply_rules,
    changed_lines,
    glob_pattern,
    patch_lines,
    select,
)

OURS = {
    "kernels/__init__.py": "",
    "kernels/launch.py": "import torch\n",
    "kernels/heuristics.py": "from kernels import launch\n",
    "kernels/ops/__init__.py": "",
    "kernels/ops/_adaptive.py": "from kernels.heuristics import *\n",
    "kernels/ops/pool/__init__.py": "from .rows import run\n",
    "kernels/ops/pool/rows.py": "from kernels.ops import _adaptive\n",
    "kernels/ops/pool_backward/__init__.py": "from kernels import launch\n",
    "kernels/ops/solo/__init__.py": "x = 1\n",
    "kernels/backends/_mthreads/ops/pool_backward/__init__.py": "",
    "kernels/benchmark/pool.py": "",
    "tests/kernels/test_pool.py": (
        "import pytest\n"              # 1
        "pytestmark = pytest.mark.pool\n"  # 2
        "\n"                             # 3
        "def helper():\n"                # 4
        "    return 1\n"                 # 5
        "\n"                             # 6
        "@pytest.mark.parametrize('n', [1])\n"  # 7
        "def test_one(n):\n"             # 8
        "    assert n\n"                 # 9
    ),
    "docs/notes.md": "",
}
OPS = {"pool", "pool_backward", "solo"}


def run(tree: dict[str, str], ops: set[str], *changed: Changed):  # type: ignore[no-untyped-def]
    return select(changed, tree, tree.get, ops)


def test_own_files_of_this_layout() -> None:
    found = run(
        OURS, OPS,
        Changed("kernels/ops/pool/rows.py"),
        Changed("kernels/backends/_mthreads/ops/pool_backward/__init__.py"),
        Changed("docs/notes.md"),
    )  # fmt: skip
    assert set(found.operators) == {"pool", "pool_backward"}
    assert found.operators["pool"] == ["kernels/ops/pool/rows.py: its own file"]
    assert found.unmatched == ["docs/notes.md"]


def test_shared_code_selects_every_operator_that_imports_it_transitively() -> None:
    found = run(OURS, OPS, Changed("kernels/launch.py"))
    # pool reaches it through rows → _adaptive → heuristics; solo imports nothing of it.
    assert set(found.operators) == {"pool", "pool_backward"}
    assert "kernels/launch.py: imported by kernels/ops/pool/rows.py" in found.operators["pool"]
    assert run(OURS, OPS, Changed("kernels/ops/_adaptive.py")).operators.keys() == {"pool"}


def test_tests_select_by_the_lines_that_changed() -> None:
    inside = run(OURS, OPS, Changed("tests/kernels/test_pool.py", lines=((9, 9),)))
    assert inside.operators == {"pool": ["tests/kernels/test_pool.py: its tests changed"]}
    helper = run(OURS, OPS, Changed("tests/kernels/test_pool.py", lines=((5, 5),)))
    assert set(helper.operators) == {"pool"}  # outside every test: all of the file's


FLAGGEMS = {
    "src/flag_gems/__init__.py": "from .ops import *\n",
    "src/flag_gems/utils/shape.py": "def broadcast(): pass\n",
    "src/flag_gems/ops/__init__.py": "from .cummax import cummax\n",
    "src/flag_gems/ops/cummax.py": (
        "from flag_gems.utils.shape import broadcast\n"
        "def cummax(x): pass\n"
        "def cummaxmin_backward(g): pass\n"
    ),
    "src/flag_gems/ops/_conj_copy.py": "def conj_copy(x): pass\n",
    "src/flag_gems/ops/abs.py": "def abs(x): pass\n",
    "src/flag_gems/runtime/backend/_mthreads/ops/pad.py": (
        "def pad(x): pass\ndef constant_pad_nd(x): pass\n"
    ),
    "tests/test_reduction_ops.py": (
        "import pytest\n"                        # 1
        "@pytest.mark.cummax\n"                  # 2
        "def test_cummax():\n"                   # 3
        "    pass\n"                             # 4
        "@pytest.mark.cummaxmin_backward\n"      # 5
        "def test_cummaxmin_backward():\n"       # 6
        "    pass\n"                             # 7
        "@pytest.mark.abs\n"                     # 8
        "def test_abs():\n"                      # 9
        "    pass\n"                             # 10
    ),
}
FG_OPS = {"cummax", "cummaxmin_backward", "conj_copy", "abs", "pad", "constant_pad_nd"}


def test_a_flaggems_module_serves_the_operators_it_defines() -> None:
    found = run(FLAGGEMS, FG_OPS, Changed("src/flag_gems/ops/cummax.py"))
    assert set(found.operators) == {"cummax", "cummaxmin_backward"}
    vendor = run(FLAGGEMS, FG_OPS, Changed("src/flag_gems/runtime/backend/_mthreads/ops/pad.py"))
    assert set(vendor.operators) == {"pad", "constant_pad_nd"}
    private = run(FLAGGEMS, FG_OPS, Changed("src/flag_gems/ops/_conj_copy.py"))
    assert set(private.operators) == {"conj_copy"}


def test_a_flaggems_test_file_selects_only_the_tests_that_changed() -> None:
    found = run(FLAGGEMS, FG_OPS, Changed("tests/test_reduction_ops.py", lines=((6, 7),)))
    assert set(found.operators) == {"cummaxmin_backward"}  # not the file's cummax or abs
    whole = run(FLAGGEMS, FG_OPS, Changed("tests/test_reduction_ops.py"))
    assert set(whole.operators) == {"cummax", "cummaxmin_backward", "abs"}


def test_flaggems_shared_code_and_a_rename() -> None:
    shared = run(FLAGGEMS, FG_OPS, Changed("src/flag_gems/utils/shape.py"))
    assert set(shared.operators) == {"cummax", "cummaxmin_backward"}
    moved = dict(FLAGGEMS)
    moved["src/flag_gems/ops/absolute.py"] = moved.pop("src/flag_gems/ops/abs.py")
    renamed = run(
        moved, FG_OPS, Changed("src/flag_gems/ops/absolute.py", previous="src/flag_gems/ops/abs.py")
    )
    assert set(renamed.operators) == {"abs"}  # the function it defines names it


def test_changed_lines_from_a_zero_context_diff() -> None:
    diff = (
        "diff --git a/t.py b/t.py\n--- a/t.py\n+++ b/t.py\n"
        "@@ -3,0 +4,2 @@\n+x\n+y\n@@ -10 +12 @@\n-a\n+b\n@@ -20,3 +22,0 @@\n-c\n"
        "diff --git a/gone.py b/gone.py\n--- a/gone.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-z\n"
    )
    assert changed_lines(diff) == {"t.py": ((4, 5), (12, 12), (22, 22))}


def test_a_file_no_parser_can_read_touches_nothing_and_breaks_nothing() -> None:
    """A pull request's test file may be anything: too deep for Python's parser, say."""
    tree = {**OURS, "tests/kernels/test_deep.py": "x = " + "-" * 200_000 + "1\n"}
    found = run(
        tree, OPS, Changed("tests/kernels/test_deep.py"), Changed("kernels/ops/solo/__init__.py")
    )
    assert set(found.operators) == {"solo"}
    assert found.unmatched == ["tests/kernels/test_deep.py"]


def test_a_repository_rule_covers_what_the_graph_cannot_see() -> None:
    """A table loaded by name: no import reaches it, the repository's rule does."""
    tree = {**OURS, "kernels/tables/pool.yaml": ""}
    change = Changed("kernels/tables/pool.yaml")
    assert run(tree, OPS, change).operators == {}
    rules = [Rule(("kernels/tables/**",), ("pool", "solo")), Rule(("docs/*.md",), ("pool",))]
    found = apply_rules(run(tree, OPS, change), [change], rules)
    assert found.operators == {
        "pool": ["kernels/tables/pool.yaml: the repository's rule `kernels/tables/**`"],
        "solo": ["kernels/tables/pool.yaml: the repository's rule `kernels/tables/**`"],
    }
    assert found.unmatched == []


def test_path_globs_keep_star_within_a_folder() -> None:
    assert glob_pattern("src/*.py").match("src/a.py")
    assert not glob_pattern("src/*.py").match("src/x/a.py")
    assert glob_pattern("src/**/*.py").match("src/a.py")
    assert glob_pattern("src/**/*.py").match("src/x/y/a.py")
    assert not glob_pattern("src/**/*.py").match("src/x/a.pyc")
    assert glob_pattern("a?c").match("abc") and not glob_pattern("a?c").match("a/c")
    assert glob_pattern("docs/[x].md").match("docs/[x].md")  # the rest is literal


def test_changed_lines_from_a_patch_with_context() -> None:
    """The files API gives each file's hunks with three lines of context: only the added and
    removed lines count."""
    patch = (
        "@@ -1,5 +1,6 @@\n"
        " import pytest\n"      # new 1
        "-pytestmark = 1\n"      # removed before new 2
        "+pytestmark = 2\n"      # new 2
        "+extra = 3\n"           # new 3
        " \n"                    # new 4
        " def helper():\n"       # new 5
        "@@ -20,3 +21,2 @@ def test_one(n):\n"
        " a\n"                   # new 21
        "-b\n"                   # removed before new 22
        " c\n"                   # new 22
        "\\ No newline at end of file"
    )  # fmt: skip
    assert patch_lines(patch) == ((2, 3), (22, 22))
    assert patch_lines(None) is None and patch_lines("") is None
