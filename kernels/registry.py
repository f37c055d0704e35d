"""The one list of operators and vendors: everything else in the library follows from it.

An operator entry gives the package export (`kernels.<name>`), the runtime's dispatch
(`kernels.runtime.function`), the `torch.library` registration (`kernels.registration`), the
benchmark's discovery (`python -m kernels.benchmark --op <name>`) and the pytest marker
(`tests/conftest.py`). A vendor entry gives detection (`kernels.runtime`), the dispatch key
its device registers under, and where its overrides and heuristics live
(`kernels/backends/_<name>/`). Adding either is one entry here; `docs/adding-an-operator.md`
and `docs/adding-a-vendor.md` walk through it.

Plain data with no imports from the library or torch, so `tests/conftest.py` can read it
without importing torch, and nothing here can start an import cycle.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Operator:
    """One operator of the library."""

    name: str  # the function's name in its module, in `kernels` and as a pytest marker
    doc: str  # one line: what it computes
    module: str  # the module of its generic implementation: a function named `name`
    aten: str | None  # the `aten` operator it implements through torch.library, or None
    benchmark: str | None  # the module of its benchmark definition (`BENCHMARK`), or None


@dataclass(frozen=True)
class Vendor:
    """One hardware vendor: how it is detected and where its code lives."""

    name: str  # KERNELS_VENDOR value; its code is in kernels/backends/_<name>/
    device_type: str  # the torch device type its hardware shows as ("cuda", "musa", "cpu")
    dispatch_key: str  # the torch dispatch key of that device type
    plugin: str | None = None  # a module that registers the device type with torch, if any

    @property
    def package(self) -> str:
        """Its backend package: `ops` (overrides) and `heuristics` (generic kernels' tiles)."""
        return f"kernels.backends._{self.name}"


OPERATORS: tuple[Operator, ...] = (
    Operator(
        name="adaptive_max_pool3d",
        doc="Adaptive 3-D max pooling: values and int64 flat D·H·W indices, as PyTorch's.",
        module="kernels.ops.adaptive_max_pool3d",
        aten="adaptive_max_pool3d",
        benchmark="kernels.benchmark.adaptive_max_pool3d",
    ),
    Operator(
        name="adaptive_max_pool3d_backward",
        doc="Gradient of adaptive_max_pool3d with respect to its input (deterministic).",
        module="kernels.ops.adaptive_max_pool3d_backward",
        aten="adaptive_max_pool3d_backward",
        benchmark="kernels.benchmark.adaptive_max_pool3d_backward",
    ),
)

# In detection order: the first whose device type torch can reach is the detected vendor;
# `cpu` (Triton's interpreter) comes last and is always reachable.
VENDORS: tuple[Vendor, ...] = (
    Vendor("mthreads", device_type="musa", dispatch_key="PrivateUse1", plugin="torch_musa"),
    Vendor("nvidia", device_type="cuda", dispatch_key="CUDA"),
    Vendor("cpu", device_type="cpu", dispatch_key="CPU"),
)


def operator(name: str) -> Operator:
    """The entry of operator `name`; KeyError naming the known ones otherwise."""
    for op in OPERATORS:
        if op.name == name:
            return op
    raise KeyError(f"unknown operator {name!r}; known: {', '.join(op.name for op in OPERATORS)}")


def vendor(name: str) -> Vendor:
    """The entry of vendor `name`; ValueError naming the known ones otherwise."""
    for entry in VENDORS:
        if entry.name == name:
            return entry
    raise ValueError(f"unknown vendor {name!r}; known: {', '.join(v.name for v in VENDORS)}")


def vendor_of_device(device_type: str) -> Vendor:
    """The vendor whose hardware shows as `device_type` (the `cpu` vendor for anything else)."""
    for entry in VENDORS:
        if entry.device_type == device_type:
            return entry
    return vendor("cpu")
