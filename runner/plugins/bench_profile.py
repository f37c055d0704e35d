"""Run a benchmark step's command with some of its rows profiled (`/test profile`): the
runner starts `python -m bench_profile ARGV...` (ARGV the step's own, less its Python) from a
copy in the job's directory, in the tree as the step runs.

The harness runs as ever; each of the workflow's timers (`$BENCH_PROFILE_TIMERS`, comma
separated `module:attribute`) is wrapped: a timer is called with the timed function first,
twice a row (the reference's, then the kernel's), so call `2i + 1` times row i's kernel. For
each row in `$BENCH_PROFILE_ROWS` the kernel's function is called `$BENCH_PROFILE_CALLS` more
times under `torch.profiler` (activities `$BENCH_PROFILE_ACTIVITIES`, torch's names), each
call inside a `record_function` range named `ondemand.call:OP` (`$BENCH_PROFILE_OP`), and the
profile is exported as a Chrome trace to `$BENCH_PROFILE_DIR/row-<i>.json`. The harness's
own timing is left as it was (the profile runs after it). Imports only the standard library
until a row is profiled.
"""

from __future__ import annotations

import functools
import importlib
import os
import runpy
import sys
from collections.abc import Callable
from typing import Any

CALL_RANGE = "ondemand.call"
DEFAULT_CALLS = 5

_calls = 0
_inside = False


def _rows() -> set[int]:
    words = os.environ.get("BENCH_PROFILE_ROWS", "").split(",")
    return {int(w) for w in words if w.strip().isdigit()}


def _profiled(fn: Callable[[], Any], row: int) -> None:
    """`fn` called BENCH_PROFILE_CALLS times under the profiler, exported as row-<row>.json."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    names = os.environ.get("BENCH_PROFILE_ACTIVITIES", "cpu").split(",")
    activities = [getattr(ProfilerActivity, n.strip().upper()) for n in names if n.strip()]
    calls = int(os.environ.get("BENCH_PROFILE_CALLS", DEFAULT_CALLS))
    fn()  # warm: what compiles or caches on a first call stays out of the profile
    with profile(activities=activities) as prof:
        for _ in range(calls):
            with record_function(f"{CALL_RANGE}:{os.environ.get('BENCH_PROFILE_OP', '')}"):
                fn()
                _synchronize(torch)
    out = os.path.join(os.environ["BENCH_PROFILE_DIR"], f"row-{row}.json")
    prof.export_chrome_trace(out)


def _synchronize(torch: Any) -> None:
    """Wait for the device torch names as its current accelerator (none on the CPU), so a
    call's range holds its kernels."""
    accelerator = getattr(torch, "accelerator", None)
    try:
        current = accelerator.current_accelerator() if accelerator is not None else None
    except RuntimeError:
        current = None
    if current is not None and current.type != "cpu":
        accelerator.synchronize()
    elif torch.cuda.is_available():
        torch.cuda.synchronize()


def _wrap(timer: Callable[..., Any], rows: set[int]) -> Callable[..., Any]:
    @functools.wraps(timer)
    def timed(*args: Any, **kwargs: Any) -> Any:
        global _calls, _inside
        if _inside:  # a timer that calls another wrapped one: one reading
            return timer(*args, **kwargs)
        _inside = True
        try:
            result = timer(*args, **kwargs)
            fn = next((a for a in args if callable(a) and not hasattr(a, "__self__")), None)
            fn = fn if fn is not None else next((a for a in args if callable(a)), None)
            row, kernel = divmod(_calls, 2)
            _calls += 1
            if kernel and row in rows and fn is not None:
                try:
                    _profiled(fn, row)
                except Exception as exc:  # the harness goes on: the profile is never its verdict
                    print(f"bench_profile: row {row}: {type(exc).__name__}: {exc}", file=sys.stderr)
            return result
        finally:
            _inside = False

    return timed


def _patch(name: str, rows: set[int]) -> None:
    """Wrap the timer `module:attribute` (a class's method as `Class.method`); a module the
    tree lacks is passed over."""
    module_name, _, attribute = name.partition(":")
    try:
        owner: Any = importlib.import_module(module_name)
    except ImportError:
        return
    *path, last = attribute.split(".")
    for part in path:
        owner = getattr(owner, part, None)
        if owner is None:
            return
    timer = getattr(owner, last, None)
    if timer is not None:
        setattr(owner, last, _wrap(timer, rows))


def main(argv: list[str]) -> None:
    """Run `argv` (`-m MODULE ARGS...` or `SCRIPT ARGS...`) as Python would, timers wrapped."""
    sys.path.insert(0, os.getcwd())
    rows = _rows()
    for name in filter(None, os.environ.get("BENCH_PROFILE_TIMERS", "").split(",")):
        _patch(name.strip(), rows)
    if argv[:1] == ["-m"]:
        sys.argv = [argv[1], *argv[2:]]
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    else:
        sys.argv = list(argv)
        runpy.run_path(argv[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])
