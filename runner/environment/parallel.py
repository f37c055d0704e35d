"""How many pytest-xdist workers a job's accuracy step gets (the `{xdist}` placeholder): the
cores a slot may use while kernels compile, one process once they load from the compile cache."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import PurePosixPath

# xdist workers once the kernels load from the cache: one process. Loaded kernels leave the
# tests little work (on the H200, 430 tests of about 10 ms each), less than what each extra
# worker costs: its own `import torch` and CUDA start (about 3.5 s), and the device
# time-sliced between processes (a 10 ms test took 1 s beside seven other workers). A commit
# whose sources differ from the trusted build's compiles what it changed: it gets the cold
# width (`may_compile_anew`).
WARM_WORKERS = 1


# What a change may touch and still compile nothing new: tests, docs, benchmarks, CI files.
_NOT_COMPILED = frozenset(
    {"tests", "test", "docs", "doc", "benchmark", "benchmarks", "examples", ".github", ".ci"}
)
_SOURCES = frozenset({".py", ".pyx", ".c", ".cc", ".cpp", ".cu", ".cuh", ".h", ".hpp"})


def may_compile_anew(changed: Iterable[str]) -> bool:
    """Whether a commit differing from a trusted build's in these paths may compile kernels
    the trusted build did not: any source file outside tests, docs and benchmarks (what
    holds the kernels is the repository's own layout, so anything else counts)."""
    for path in changed:
        parts = PurePosixPath(path).parts
        if PurePosixPath(path).suffix in _SOURCES and not _NOT_COMPILED & set(parts[:-1]):
            return True
    return False


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
