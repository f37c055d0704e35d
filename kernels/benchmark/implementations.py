"""Which implementation runs and where: the bridge to `kernels.runtime`.

Importing this module imports `kernels.runtime` first, which sets up the Triton interpreter
on a machine without a GPU before Triton is loaded.
"""

from __future__ import annotations

import importlib.util
import os
import platform
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from kernels import registry, runtime


def _has_overrides(vendor: registry.Vendor) -> bool:
    """Whether the vendor's backend package has operator overrides (an `ops` package)."""
    try:
        return importlib.util.find_spec(f"{vendor.package}.ops") is not None
    except ModuleNotFoundError:  # no backend package at all
        return False


# What `--impl` takes: the active implementation, the generic one, or a vendor's overrides.
IMPLS: tuple[str, ...] = (
    "active",
    "generic",
    *(v.name for v in registry.VENDORS if _has_overrides(v)),
)


@dataclass(frozen=True)
class Target:
    """The device a run measures on and what the timings there mean."""

    device: str  # torch device type: cuda, musa or cpu
    device_name: str
    vendor: str
    performance: bool  # False under the Triton interpreter
    torch_version: str
    triton_version: str


def current_target() -> Target:
    """Describe this process's device, vendor and library versions."""
    import triton

    interpreted = runtime.interpreted or os.environ.get("TRITON_INTERPRET") == "1"
    return Target(
        device=runtime.device,
        device_name=device_name(runtime.device),
        vendor=runtime.vendor(),
        performance=not interpreted,
        torch_version=torch.__version__,
        triton_version=triton.__version__,
    )


def device_name(device: str) -> str:
    """The accelerator's marketing name, or the CPU's architecture under the interpreter."""
    if device == "cuda":
        return torch.cuda.get_device_name()
    if device == "musa":
        return str(torch.musa.get_device_name())  # type: ignore[attr-defined]
    return f"CPU {platform.machine()} (Triton interpreter)"


def synchronizer(device: str) -> Callable[[], None]:
    """Waits for all work queued on `device` (a no-op on the CPU)."""
    if device == "cuda":
        return torch.cuda.synchronize
    if device == "musa":
        return torch.musa.synchronize  # type: ignore[attr-defined,no-any-return]
    return lambda: None


def check_reference_is_pytorch() -> None:
    """Refuse to run while our kernels are registered for aten's operators: the reference
    would then be our own kernel."""
    import kernels

    if kernels.enabled():
        raise RuntimeError(
            "kernels.enable() is in effect: aten's operators dispatch to our kernels, so "
            "PyTorch's own operator cannot be the reference (call kernels.disable() first)"
        )


def select(op: str, impl: str) -> tuple[Callable[..., Any], str]:
    """The function to time for `op` and its dotted path.

    `generic` is the vendor-neutral op; a vendor (`mthreads`) forces that vendor for the rest
    of the process (its ops may check the active vendor) and takes its version, or the generic
    one when it has none; `active` is what the runtime dispatches to here.
    """
    if impl not in IMPLS:
        raise ValueError(f"unknown implementation {impl!r}; known: {', '.join(IMPLS)}")
    if impl not in ("active", "generic"):
        runtime.set_vendor(impl)
    fn = runtime.function(op, impl)
    return fn, f"{fn.__module__}.{fn.__qualname__}"
