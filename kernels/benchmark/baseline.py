"""Another tree's kernels in this process, beside the current ones: the before of a comparison.

The `kernels` package of a checkout (the merge base of a pull request) is copied into a
scratch folder under another name (`kernels_baseline`), its own imports of `kernels.` rewritten
to that name, and imported. Both versions then share the process, the device, PyTorch and the
inputs the current benchmark definition prepares: a row's before and after are timed in turn
against the same tensors, so drift, order and memory placement favour neither.
"""

from __future__ import annotations

import importlib
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

BASELINE = "kernels_baseline"
_IMPORTS = re.compile(r"\bkernels(?=\.[A-Za-z_])|(?<=\bfrom )kernels\b|(?<=\bimport )kernels\b")


class BaselineError(Exception):
    """The other tree's kernels cannot be loaded here, or lack the operator."""


def copy_package(source: Path, name: str, where: Path) -> Path:
    """The package folder `source` (a `kernels` package) copied under `where` as the package
    `name`, its `kernels` imports and module paths rewritten to `name`; its path."""
    package = where / name
    shutil.copytree(source, package, ignore=shutil.ignore_patterns("*.pyc", "__pycache__"))
    for path in package.rglob("*.py"):
        path.write_text(_IMPORTS.sub(name, path.read_text(encoding="utf-8")), encoding="utf-8")
    return package


def import_package(name: str, where: Path) -> ModuleType:
    """Import the copied package `name` from the folder `where`."""
    if str(where) not in sys.path:
        sys.path.insert(0, str(where))
    return importlib.import_module(name)


def load(tree: Path, where: Path, name: str = BASELINE) -> ModuleType:
    """The `kernels` package of the checkout `tree`, loaded as `name` from a copy under `where`.
    Raises BaselineError when the tree has none or it does not import."""
    source = tree / "kernels"
    if not (source / "__init__.py").is_file():
        raise BaselineError(f"{tree} has no kernels package")
    try:
        copy_package(source, name, where)
        return import_package(name, where)
    except Exception as exc:  # whatever the other tree's import raises
        why = f"{type(exc).__name__}: {exc}"
        raise BaselineError(f"the kernels of {tree} do not load: {why}") from exc


def function(package: ModuleType, op: str, impl: str) -> Callable[..., Any]:
    """`op`'s implementation `impl` (active, generic or a vendor) in a loaded package, the
    vendor set as `implementations.select` sets it in the current one."""
    runtime = getattr(package, "runtime", None)
    if runtime is None or not hasattr(runtime, "function"):
        raise BaselineError(f"{package.__name__} has no runtime.function")
    try:
        if impl not in ("active", "generic"):
            runtime.set_vendor(impl)
        fn: Callable[..., Any] = runtime.function(op, impl)
    except Exception as exc:
        raise BaselineError(f"{package.__name__} has no {op} ({impl}): {exc}") from exc
    return fn
