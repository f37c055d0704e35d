"""Which vendor and device this process runs on, and which implementation of each op is active.

Detection (once, at import): `KERNELS_VENDOR` wins when set (`nvidia`, `mthreads`, `cpu`);
otherwise torch_musa with a MUSA device means `mthreads`, CUDA means `nvidia`, and anything
else `cpu`. The device is whatever torch can reach (`musa`, `cuda` or `cpu`), independent of
the vendor, so forcing `mthreads` on a CUDA or CPU machine runs the Moore Threads kernels
there. On the `cpu` device Triton runs through its interpreter: this module sets
`TRITON_INTERPRET=1` before any kernel is defined (Triton reads the variable when `@triton.jit`
decorates a function, and `kernels/__init__.py` imports this module before the operators).

Vendor overrides: a function in `kernels.backends._<vendor>.ops` replaces the generic function
of the same name in `kernels.ops`. `implementation(name)` gives the dotted path of the active
function (for test reports); `function(name, impl)` returns the generic, a vendor's, or the
active one; `force(vendor)` switches the active vendor for a block (tests, benchmarks).
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import torch

VENDORS: tuple[str, ...] = ("nvidia", "mthreads", "cpu")
OPERATORS: tuple[str, ...] = ("adaptive_max_pool3d", "adaptive_max_pool3d_backward")
_OPERATOR_SET = frozenset(OPERATORS)
_DISPATCH_KEYS: dict[str, str] = {"cuda": "CUDA", "musa": "PrivateUse1", "cpu": "CPU"}


def _musa_available() -> bool:
    try:
        import torch_musa  # noqa: F401  (registers the musa device with torch)
    except ImportError:
        return False
    musa = getattr(torch, "musa", None)
    return bool(musa is not None and musa.is_available())


def _detect_device() -> str:
    if _musa_available():
        return "musa"
    if torch.cuda.is_available():
        return "cuda"
    return "cpu"


def _detect_vendor(device_type: str) -> str:
    forced = os.environ.get("KERNELS_VENDOR", "").strip().lower()
    if forced:
        if forced not in VENDORS:
            raise ValueError(f"KERNELS_VENDOR={forced!r} is not one of {', '.join(VENDORS)}")
        return forced
    return {"musa": "mthreads", "cuda": "nvidia"}.get(device_type, "cpu")


device: str = _detect_device()
detected_vendor: str = _detect_vendor(device)
_active_vendor: str = detected_vendor
interpreted: bool = device == "cpu"
if interpreted:
    os.environ["TRITON_INTERPRET"] = "1"


def vendor() -> str:
    """The vendor whose overrides are active now (detected, or forced by `force`)."""
    return _active_vendor


def forced() -> bool:
    """True when the active vendor is not the one the hardware has (override or `force`)."""
    natural = {"musa": "mthreads", "cuda": "nvidia"}.get(device, "cpu")
    return _active_vendor != natural


def dispatch_key() -> str:
    """The torch dispatch key of this process's device (CUDA, PrivateUse1 for MUSA, or CPU)."""
    return _DISPATCH_KEYS[device]


def _check_operator(name: str) -> None:
    if name not in _OPERATOR_SET:
        raise KeyError(f"unknown operator {name!r}; known: {', '.join(OPERATORS)}")


_vendor_modules: dict[str, ModuleType | None] = {}
_forced_wrappers: dict[tuple[Callable[..., Any], str], Callable[..., Any]] = {}


def _vendor_ops(vendor_name: str) -> ModuleType | None:
    """The vendor's ops package, or None if it has none (looked up once: calls are hot)."""
    if vendor_name not in _vendor_modules:
        try:
            module: ModuleType | None = importlib.import_module(
                f"kernels.backends._{vendor_name}.ops"
            )
        except ModuleNotFoundError as error:
            if not (error.name and error.name.startswith("kernels.backends")):
                raise
            module = None
        _vendor_modules[vendor_name] = module
    return _vendor_modules[vendor_name]


def _generic_ops() -> ModuleType:
    return sys.modules.get("kernels.ops") or importlib.import_module("kernels.ops")


def function(name: str, impl: str = "active") -> Callable[..., Any]:
    """The function of operator `name`: `generic`, a vendor's name, or `active`.

    A vendor without its own version of the operator gives the generic one. A vendor's
    version asked for by name while another vendor is active runs under `force(vendor)`, so
    `function(op, "mthreads")` runs the Moore Threads kernel on any device (benchmarks).
    """
    _check_operator(name)
    generic = getattr(_generic_ops(), name)
    if impl == "generic":
        return generic
    vendor_name = _active_vendor if impl == "active" else impl
    if vendor_name not in VENDORS:
        raise ValueError(f"unknown implementation {impl!r}: generic, active or {VENDORS}")
    module = _vendor_ops(vendor_name)
    fn = getattr(module, name, generic) if module is not None else generic
    if fn is generic or vendor_name == _active_vendor:
        return fn
    key = (fn, vendor_name)
    if key not in _forced_wrappers:
        _forced_wrappers[key] = _forced(fn, vendor_name)
    return _forced_wrappers[key]


def _forced(fn: Callable[..., Any], vendor_name: str) -> Callable[..., Any]:
    """`fn` run under `force(vendor_name)`, so its guard lets it run off its own hardware."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        with force(vendor_name):
            return fn(*args, **kwargs)

    return run


def implementation(name: str) -> str:
    """Dotted path of the active function of operator `name`, e.g. for a test report."""
    fn = function(name)
    return f"{fn.__module__}.{fn.__qualname__}"


def set_vendor(vendor_name: str) -> None:
    """Make `vendor_name`'s overrides active for the rest of the process."""
    global _active_vendor
    if vendor_name not in VENDORS:
        raise ValueError(f"unknown vendor {vendor_name!r}; known: {', '.join(VENDORS)}")
    _active_vendor = vendor_name


@contextmanager
def force(vendor_name: str) -> Iterator[None]:
    """Make `vendor_name`'s overrides active inside the block, whatever the hardware."""
    previous = _active_vendor
    set_vendor(vendor_name)
    try:
        yield
    finally:
        set_vendor(previous)
