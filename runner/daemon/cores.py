"""The host's CPU cores shared among a runner's slots (`--cores-per-slot N|auto|off`).

Each slot gets a block of cores of its own; its worker thread is pinned to them, and the
kernel hands a thread's CPU affinity to every thread and process it starts: the job's steps,
their compilers and pytest workers, its device check and trusted build all stay on the
slot's cores, whatever starts them, and a neighbour's compile or benchmark cannot take a
timing process's core. The cores left over stay the daemon's and the host's.

A slot needs `MIN_CORES_PER_SLOT` (docs/runner.md says why): where the host cannot give every
slot that many, the slots are left unpinned, sharing every core, and the runner says so.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass

from ondemand.options import Number

# A job's benchmark step keeps one core busy (its timing process: launches, the comparison's
# rounds) and its helpers (the runner's output pump and heartbeat, a comparison's second
# process between rounds) want part of another: two cores keep a neighbour's compile off the
# timing process's core. Measured in docs/runner.md ("Slots and cores").
MIN_CORES_PER_SLOT = 2
AUTO, OFF = "auto", "off"


class CoresPerSlot(Number):
    """`--cores-per-slot`'s type: a whole number ≥ 1, `auto` or `off`."""

    def __init__(self) -> None:
        super().__init__(int, 1)

    def describe(self) -> str:
        return f"{super().describe()}, {AUTO} or {OFF}"

    def __call__(self, text: str) -> int | float | str:  # type: ignore[override]
        if text.strip().lower() in (AUTO, OFF):
            return text.strip().lower()
        try:
            return super().__call__(text)
        except argparse.ArgumentTypeError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {self.describe()}") from None


@dataclass(frozen=True)
class CorePlan:
    """Each slot's cores (all empty: unpinned, `unpinned` says why) and the daemon's spare."""

    slots: tuple[tuple[int, ...], ...]
    spare: tuple[int, ...]
    unpinned: str | None = None

    def cores(self, slot: int) -> tuple[int, ...] | None:
        """The cores `slot` is pinned to; None when slots are not pinned."""
        if self.unpinned is not None or slot >= len(self.slots):
            return None
        return self.slots[slot]

    def describe(self, devices: Sequence[str | None]) -> list[str]:
        """One line per slot: its device and its cores (for the log and the doctor)."""
        lines = []
        for slot, device in enumerate(devices):
            cores = self.cores(slot)
            where = f"cores {span(cores)}" if cores else "all cores (unpinned)"
            lines.append(f"slot {slot}: device {device if device is not None else '-'}, {where}")
        return lines


def partition(
    available: Sequence[int], slots: int, per_slot: int | str, minimum: int = MIN_CORES_PER_SLOT
) -> CorePlan:
    """The host's `available` cores (`os.sched_getaffinity(0)`) among `slots`: `per_slot`
    each (`auto`: as many as divide evenly, at least `minimum`; `off`: none pinned), in
    blocks of consecutive ids, the rest spare. Where not every slot can have its share, none
    is pinned, and `unpinned` says why."""
    cores = tuple(sorted(set(available)))
    if per_slot == OFF:
        return CorePlan((), cores, "--cores-per-slot off")
    if per_slot == AUTO:
        if slots <= 1:
            return CorePlan((), cores, "one slot: its steps have every core")
        each = len(cores) // slots
        if each < minimum:
            return CorePlan((), cores, (
                f"{len(cores)} cores for {slots} slots: fewer than {minimum} each, so the "
                "slots share every core"
            ))  # fmt: skip
    else:
        each = int(per_slot)
        if each * slots > len(cores):
            return CorePlan((), cores, (
                f"{slots} slots × {each} cores need {each * slots}; this runner may use "
                f"{len(cores)} ({span(cores)})"
            ))  # fmt: skip
    blocks = tuple(cores[i * each : (i + 1) * each] for i in range(slots))
    return CorePlan(blocks, cores[slots * each :])


def host_cores() -> tuple[int, ...]:
    """The cores this process may run on."""
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux: no affinity to read or set
        return tuple(range(os.cpu_count() or 1))


def pin_thread(cores: Sequence[int] | None) -> None:
    """Pin the calling thread (pid 0 is the calling thread on Linux) to `cores`: threads and
    processes it starts from now on inherit them. None: nothing changes."""
    if cores and hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, cores)


def span(cores: Sequence[int] | None) -> str:
    """`0-3,8,10-11`: core ids as ranges."""
    if not cores:
        return ""
    ids = sorted(set(cores))
    parts, start, prev = [], ids[0], ids[0]
    for core in [*ids[1:], None]:
        if core is not None and core == prev + 1:
            prev = core
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if core is not None:
            start = prev = core
    return ",".join(parts)
