"""Which vendor and device this process runs on, and which implementation of each op is active.

Detection (once, at import): `KERNELS_VENDOR` wins when set (a name in `kernels.registry`);
otherwise the first registry vendor whose device type torch can reach (its plugin, such as
torch_musa, imported first), and `cpu` when none. The device is whatever torch can reach,
independent of the vendor, so forcing `mthreads` on a CUDA or CPU machine runs the Moore
Threads kernels there. On the `cpu` device Triton runs through its interpreter: this module
sets `TRITON_INTERPRET=1` before any kernel is defined (Triton reads the variable when
`@triton.jit` decorates a function, and `kernels/__init__.py` imports this module first).

Vendor overrides: a function in `kernels.backends._<vendor>.ops` replaces the generic function
of the same name. `implementation(name)` gives the dotted path of the active function (for
test reports); `function(name, impl)` returns the generic, a vendor's, or the active one;
`force(vendor)` switches the active vendor for a block (tests, benchmarks).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from types import ModuleType
from typing import Any

import torch

from kernels import registry

VENDORS: tuple[str, ...] = tuple(v.name for v in registry.VENDORS)
OPERATORS: tuple[str, ...] = tuple(op.name for op in registry.OPERATORS)


def _reachable(entry: registry.Vendor) -> bool:
    """Whether torch can reach a device of this vendor's type (importing its plugin first)."""
    if entry.device_type == "cpu":
        return True
    if entry.plugin is not None:
        try:
            importlib.import_module(entry.plugin)  # registers the device type with torch
        except ImportError:
            return False
    backend = getattr(torch, entry.device_type, None)
    return bool(backend is not None and backend.is_available())


def _detect_device() -> str:
    return next(v.device_type for v in registry.VENDORS if _reachable(v))


def _detect_vendor(device_type: str) -> str:
    forced = os.environ.get("KERNELS_VENDOR", "").strip().lower()
    if forced:
        if forced not in VENDORS:
            raise ValueError(f"KERNELS_VENDOR={forced!r} is not one of {', '.join(VENDORS)}")
        return forced
    return registry.vendor_of_device(device_type).name


def _drop_unasserted_overflow_checks() -> None:
    """Triton's interpreter computes an overflow check for every 32-bit integer add, subtract
    and multiply, then drops it: it asserts only in debug mode, which its options never turn
    on. Half of a kernel's interpretation time; skipped while the assertion stays off."""
    try:
        from triton.runtime import interpreter

        options = interpreter.interpreter_builder.options
        if options.sanitize_overflow and not options.debug:
            off = dataclasses.replace(options, sanitize_overflow=False)
            interpreter.interpreter_builder.options = off
    except (ImportError, AttributeError, TypeError):  # another Triton: leave it as it is
        return


def _skip_repatching_in_helpers() -> None:
    """A launch under the interpreter patches `triton.language`'s builtins and restores them
    when its grid is done; every call of a `@triton.jit` helper inside it (once per program)
    patches them again, scanning the language modules with `inspect.getmembers` to find them
    already patched: a third of a kernel's interpretation time. The helpers' calls skip that
    scan while their modules' language is patched."""
    try:
        import inspect

        import triton.language as tl
        from triton.runtime import interpreter

        patch, scope = interpreter._patch_lang, interpreter._LangPatchScope
    except (ImportError, AttributeError):  # another Triton: leave it as it is
        return
    if getattr(patch, "skips_repatching", False):
        return
    langs: dict[Callable[..., Any], list[ModuleType]] = {}  # a helper's language modules

    def patch_lang(fn: Callable[..., Any]) -> Any:
        found = langs.get(fn)
        if found is None:
            found = [
                v for v in fn.__globals__.values() if inspect.ismodule(v) and v in (tl, tl.core)
            ]
            langs[fn] = found
        # A patched builtin is the interpreter's plain function, no longer marked builtin.
        if found and not any(tl.core.is_builtin(getattr(m, "program_id", None)) for m in found):
            return scope()  # inside the launch that patched them: nothing to do or undo
        return patch(fn)

    patch_lang.skips_repatching = True  # type: ignore[attr-defined]
    interpreter._patch_lang = patch_lang


# The Triton types the interpreter maps to NumPy's, by name in `triton.language`.
NP_MAPPED = (
    *("int1", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"),
    *("float16", "bfloat16", "float32", "float64"),
    *("float8e5", "float8e5b16", "float8e4nv", "float8e4b8", "float8e4b15"),
)


def _map_np_dtypes_once() -> None:
    """The interpreter asks which NumPy dtype holds a Triton type for every value an
    operation makes, and builds its table of eighteen types anew each time: 7 µs a call,
    nearly a tenth of a kernel's interpretation. The same answers from the table built once
    (a type it does not hold, pointers aside, still goes to the interpreter's function)."""
    try:
        import triton.language as tl
        from triton.runtime import interpreter

        original = interpreter._get_np_dtype
        pointer = original(tl.pointer_type(tl.int8))
    except (ImportError, AttributeError, KeyError, TypeError):  # another Triton
        return
    if getattr(original, "original", None) is not None:
        return
    table: dict[Any, Any] = {}
    for name in NP_MAPPED:
        ty = getattr(tl, name, None)
        with suppress(KeyError, TypeError):
            if ty is not None:
                table[ty] = original(ty)

    def np_dtype(ty: Any) -> Any:
        element = ty.element_ty if isinstance(ty, tl.block_type) else ty
        if isinstance(element, tl.pointer_type):
            return pointer
        found = table.get(element)
        return found if found is not None else original(ty)

    np_dtype.original = original  # type: ignore[attr-defined]
    interpreter._get_np_dtype = np_dtype


device: str = _detect_device()
detected_vendor: str = _detect_vendor(device)
_active_vendor: str = detected_vendor
interpreted: bool = device == "cpu"
if interpreted:
    os.environ["TRITON_INTERPRET"] = "1"
    _drop_unasserted_overflow_checks()
    _skip_repatching_in_helpers()
    _map_np_dtypes_once()


def vendor() -> str:
    """The vendor whose overrides are active now (detected, or forced by `force`)."""
    return _active_vendor


def forced() -> bool:
    """True when the active vendor is not the one the hardware has (override or `force`)."""
    return _active_vendor != registry.vendor_of_device(device).name


def dispatch_key() -> str:
    """The torch dispatch key of this process's device (CUDA, PrivateUse1 for MUSA, or CPU)."""
    return registry.vendor_of_device(device).dispatch_key


_generic_modules: dict[str, ModuleType] = {}
_vendor_modules: dict[str, ModuleType | None] = {}
_forced_wrappers: dict[tuple[Callable[..., Any], str], Callable[..., Any]] = {}


def _generic_module(name: str) -> ModuleType:
    """The module of operator `name`'s generic implementation (looked up once: calls are hot)."""
    module = _generic_modules.get(name)
    if module is None:
        module = importlib.import_module(registry.operator(name).module)
        _generic_modules[name] = module
    return module


def _vendor_ops(vendor_name: str) -> ModuleType | None:
    """The vendor's ops package, or None if it has none (looked up once: calls are hot)."""
    if vendor_name not in _vendor_modules:
        package = f"{registry.vendor(vendor_name).package}.ops"
        try:
            module: ModuleType | None = importlib.import_module(package)
        except ModuleNotFoundError as error:
            missing = error.name or ""
            if not (package == missing or package.startswith(missing + ".")):
                raise  # the package exists but something it imports does not
            module = None
        _vendor_modules[vendor_name] = module
    return _vendor_modules[vendor_name]


def function(name: str, impl: str = "active") -> Callable[..., Any]:
    """The function of operator `name`: `generic`, a vendor's name, or `active`.

    A vendor without its own version of the operator gives the generic one. A vendor's
    version asked for by name while another vendor is active runs under `force(vendor)`, so
    `function(op, "mthreads")` runs the Moore Threads kernel on any device (benchmarks).
    """
    generic = getattr(_generic_module(name), name)
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
    registry.vendor(vendor_name)  # ValueError naming the known vendors
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
