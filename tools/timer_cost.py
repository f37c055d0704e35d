"""What one reading of the workers' timer costs, phase by phase
(`runner/plugins/pytest_bench_rounds.py`'s `bench`): a FlagGems round of 20 rows took 8–9 s
a side on an H100, about 0.2 s a timed call, so a 90 s budget held five rounds. This splits a
reading's wall time into the two estimate calls, the host loop, the flushes profiled alone,
the profiled calls (with the profiler's start and stop) and reading the profile's events, on
a few small operations, so the next change to the timer is made against numbers.

    python -m tools.timer_cost [--readings 20] [--json OUT]

On a CUDA host it times the profiler path; elsewhere the wall-clock path (its numbers say
nothing of a GPU). Prints one row per operation, the medians over `--readings` readings."""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from runner.plugins import pytest_bench_rounds as timer

PHASES = ("estimate", "host", "flush_alone", "profiled", "events", "other")


class Phases:
    """Seconds spent in each of the timer's phases during one reading; a phase entered inside
    another (the wall-clock path's single calls) counts as the outer one's."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self.depth = 0

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self.depth += 1
        started = time.perf_counter()
        try:
            yield
        finally:
            self.depth -= 1
            if self.depth == 0:
                self.spent[name] += time.perf_counter() - started


def _wrap(phases: Phases, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        with phases.phase(name):
            return fn(*args, **kwargs)

    return wrapped


@contextmanager
def instrumented(phases: Phases) -> Iterator[None]:
    """The timer's module with each phase's function wrapped to add its time to `phases`;
    the profiled loop is `_cuda_device_ms` less the flushes alone and the events' reading."""
    saved = {
        "_single_ms": timer._single_ms,
        "_host_ms": timer._host_ms,
        "_device_events": timer._device_events,
        "_cuda_device_ms": timer._cuda_device_ms,
        "_wall_device_ms": timer._wall_device_ms,
    }
    alone = timer._Flush.alone
    timer._single_ms = _wrap(phases, "estimate", saved["_single_ms"])
    timer._host_ms = _wrap(phases, "host", saved["_host_ms"])
    timer._device_events = _wrap(phases, "events", saved["_device_events"])
    timer._Flush.alone = _wrap(phases, "flush_alone", alone)  # type: ignore[method-assign]

    def device(*args: Any, **kwargs: Any) -> float:  # its parts are phases of their own
        before = phases.spent["flush_alone"] + phases.spent["events"]
        started = time.perf_counter()
        value = saved["_cuda_device_ms"](*args, **kwargs)
        inner = phases.spent["flush_alone"] + phases.spent["events"] - before
        phases.spent["profiled"] += time.perf_counter() - started - inner
        return value

    timer._cuda_device_ms = device
    timer._wall_device_ms = _wrap(phases, "profiled", saved["_wall_device_ms"])
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(timer, name, fn)
        timer._Flush.alone = alone  # type: ignore[method-assign]


def cases(torch: Any, device: str) -> dict[str, Callable[[], Any]]:
    """Small operations of the kinds FlagGems' host-bound rows time."""
    x64 = torch.randn(64, device=device)
    x1m = torch.randn(1 << 20, device=device)
    grid = torch.randn(1, 1, 8, 8, 8, device=device)
    pool = torch.nn.functional.adaptive_max_pool3d
    return {
        "vdot 64": lambda: torch.vdot(x64, x64),
        "exp 1Mi": lambda: torch.exp(x1m),
        "adaptive_max_pool3d 8³→4³": lambda: pool(grid, 4),
    }


def measure(readings: int) -> list[dict[str, Any]]:
    """Per case: each phase's median seconds a reading, the reading's median wall time and
    the device times it returned."""
    torch = timer._torch()
    device = "cuda" if timer._cuda(torch) else "cpu"
    rows = []
    for name, fn in cases(torch, device).items():
        spent: list[dict[str, float]] = []
        walls, values = [], []
        for _ in range(readings):
            phases = Phases()
            with instrumented(phases):
                started = time.perf_counter()
                values.append(timer.bench(fn))
                wall = time.perf_counter() - started
            phases.spent["other"] = max(0.0, wall - sum(phases.spent.values()))
            spent.append(phases.spent)
            walls.append(wall)
        timer._timings.clear()
        rows.append(
            {
                "case": name,
                "device": device,
                "wall_s": statistics.median(walls),
                "phases_s": {p: statistics.median(s[p] for s in spent) for p in PHASES},
                "device_ms": statistics.median(values),
            }
        )
    return rows


def table(rows: Sequence[dict[str, Any]]) -> str:
    head = " | ".join(f"{p} ms" for p in PHASES)
    lines = [
        f"| case | device | reading ms | {head} | device time ms |",
        "|---|---|---|" + "---|" * len(PHASES) + "---|",
    ]
    for row in rows:
        cells = " | ".join(f"{row['phases_s'][p] * 1000:.1f}" for p in PHASES)
        lines.append(
            f"| {row['case']} | {row['device']} | {row['wall_s'] * 1000:.1f} | {cells} | "
            f"{row['device_ms']:.4f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--readings", type=int, default=20)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = measure(args.readings)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    print(table(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
