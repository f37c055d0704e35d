"""Repository-wide pytest hooks: one marker per operator of the kernel registry, and one
default TLS context for every HTTP client of a test process (`tests/support/tls.py`).

The runner lists a checkout's operators with `pytest --markers`, and the workflows select an
operator's tests with `pytest tests/kernels -m <op>` under `--strict-markers`, so every
registry entry must be a registered marker. `kernels/registry.py` is read on its own: it
imports nothing, and importing the `kernels` package would import torch, which the service's
tests do not need.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.support.tls import share_default_context

REGISTRY = Path(__file__).resolve().parents[1] / "kernels" / "registry.py"


def _registry() -> ModuleType:
    """kernels.registry, or the same file loaded apart from its package."""
    loaded = sys.modules.get("kernels.registry")
    if loaded is not None:
        return loaded
    spec = importlib.util.spec_from_file_location("_kernels_registry", REGISTRY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while defining
    spec.loader.exec_module(module)
    return module


def pytest_configure(config: pytest.Config) -> None:
    share_default_context()
    for op in _registry().OPERATORS:
        config.addinivalue_line("markers", f"{op.name}: accuracy tests of kernels.{op.name}")
