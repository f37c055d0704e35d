"""A profile's Chrome trace read back (pure): what `torch.profiler`'s `export_chrome_trace`
writes, which Perfetto opens. Complete events (`ph == "X"`) only: the device's by category
(kernels, copies, sets), the host's ops (`cpu_op`) and the ranges the profiling shim put
around each call of the row's function (`ondemand.call`)."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from typing import Any

CALL_RANGE = "ondemand.call"
DEVICE_CATEGORIES = frozenset({"kernel", "gpu_memcpy", "gpu_memset"})
HOST_CATEGORY = "cpu_op"


class TraceError(ValueError):
    """Not a Chrome trace this parser can read."""


@dataclass(frozen=True)
class Kernel:
    """One kernel's (or, on a device without kernels, one host op's) time per call of the row
    (µs) and how often it ran per call."""

    name: str
    us: float
    calls: float


@dataclass(frozen=True)
class Profile:
    """One side of a row: its calls, the host time per call (the calls' ranges) and the
    kernels, dearest first; `device` False where the trace held no device event (its
    `kernels` are then the host ops each call ran at its top level)."""

    calls: int
    host_us: float | None
    kernels: list[Kernel] = field(default_factory=list)
    device: bool = True


def events(text: str) -> list[dict[str, Any]]:
    """The complete events of a trace's text (`{"traceEvents": [...]}` or a bare list)."""
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise TraceError(f"not JSON: {exc}") from exc
    found = doc.get("traceEvents") if isinstance(doc, dict) else doc
    if not isinstance(found, list):
        raise TraceError("no traceEvents")
    return [
        e
        for e in found
        if isinstance(e, dict) and e.get("ph") == "X" and isinstance(e.get("dur"), int | float)
    ]


def parse(text: str) -> Profile:
    """A trace's per-call summary: the calls are the `ondemand.call` ranges (one where there
    are none); each kernel's total time and count divided by them; the host time per call
    the calls' median."""
    complete = events(text)
    ranges = [
        e
        for e in complete
        if str(e.get("name", "")).startswith(CALL_RANGE) and e.get("cat") != "gpu_user_annotation"
    ]
    calls = max(1, len(ranges))
    # The median call: one call a busy host preempted does not stand for the row.
    host_us = statistics.median(float(e["dur"]) for e in ranges) if ranges else None
    device = [e for e in complete if e.get("cat") in DEVICE_CATEGORIES]
    chosen = device if device else _top_ops(complete, ranges)
    totals: dict[str, tuple[float, int]] = {}
    for e in chosen:
        name = str(e.get("name", "?"))
        us, count = totals.get(name, (0.0, 0))
        totals[name] = (us + float(e["dur"]), count + 1)
    kernels = [Kernel(n, us / calls, count / calls) for n, (us, count) in totals.items()]
    kernels.sort(key=lambda k: (-k.us, k.name))
    if not device and host_us is not None:
        # Without a device the op itself (its calls' range, `ondemand.call:OP`, named OP)
        # stands first, its median call, then the host ops it ran at its top level.
        op = str(ranges[0]["name"]).partition(":")[2] or CALL_RANGE
        kernels.insert(0, Kernel(op, host_us, 1.0))
    return Profile(calls=len(ranges), host_us=host_us, kernels=kernels, device=bool(device))


def _top_ops(complete: list[dict[str, Any]], ranges: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The host ops at the top level of each call (not inside another op of the call)."""
    ops = [e for e in complete if e.get("cat") == HOST_CATEGORY]
    top: list[dict[str, Any]] = []
    for span in ranges:
        start, end = float(span["ts"]), float(span["ts"]) + float(span["dur"])
        inside = [e for e in ops if start <= float(e["ts"]) and _end(e) <= end]
        inside.sort(key=lambda e: (float(e["ts"]), -float(e["dur"])))
        reach = -1.0
        for e in inside:
            if float(e["ts"]) >= reach:
                top.append(e)
                reach = _end(e)
    return top


def _end(event: dict[str, Any]) -> float:
    return float(event["ts"]) + float(event["dur"])
