"""How many pytest-xdist workers a job's accuracy step gets (the `{xdist}` placeholder): the
cores a slot may use while kernels compile, fewer once they load from the compile cache."""

from __future__ import annotations

import os

# xdist workers once the kernels load from the cache: tests then wait on the one device more
# than on compiling, and more processes time-slice it (on the H200, a 10 ms test took 1 s
# beside seven other workers); a few still run the slow, host-bound tests beside the rest.
WARM_WORKERS = 4


def default_workers(slots: int = 1, cap: int = 8) -> int:
    """pytest-xdist workers for one slot's accuracy step: the cores this process may use,
    shared among the slots, at most `cap` (more processes than that on one GPU contend for
    it more than they compile in parallel)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cap, cores // max(1, slots)))


def xdist_args(workers: int) -> list[str]:
    """The `{xdist}` placeholder: `-n N` where it helps and pytest-xdist is on the host, and
    tests handed out one at a time where it can (so the order pytest_order.py gives holds)."""
    from importlib import metadata

    try:
        version = metadata.version("pytest-xdist")
    except metadata.PackageNotFoundError:
        return []
    if workers <= 1:
        return []
    major, minor = (int(p) if p.isdigit() else 0 for p in [*version.split("."), "0"][:2])
    one_by_one = ["--maxschedchunk", "1"] if (major, minor) >= (3, 3) else []
    return ["-n", str(workers), *one_by_one]
