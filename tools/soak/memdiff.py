"""What grew in a traced soak replica (`python -m tools.soak --trace-memory DIR`): the
Python heap each snapshot held (to set beside the replica's RSS, which the soak samples each
minute: RSS growing while this stays flat is memory outside Python's objects), then the
allocations still held at the last snapshot against one from minute FROM (default 10), by
traceback, largest growth first.

    python -m tools.soak.memdiff DIR [--from-minute 10] [--top 15]
"""

from __future__ import annotations

import argparse
import re
import tracemalloc
from collections.abc import Sequence
from pathlib import Path

NAME = re.compile(r"at-(\d+(?:\.\d+)?)s\.tracemalloc$")


def snapshots(directory: Path) -> list[tuple[float, Path]]:
    """The snapshots in `directory`, by minute since the process started."""
    found = []
    for path in directory.iterdir():
        match = NAME.search(path.name)
        if match:
            found.append((float(match.group(1)) / 60, path))
    return sorted(found)


def growth(old: tracemalloc.Snapshot, new: tracemalloc.Snapshot, top: int) -> list[str]:
    """The `top` tracebacks whose held memory grew most, one block of lines each."""
    lines = []
    for stat in new.compare_to(old, "traceback")[:top]:
        if stat.size_diff <= 0:
            break
        lines.append(
            f"{stat.size_diff / 1024:+10.1f} KiB {stat.count_diff:+8d} blocks "
            f"(now {stat.size / 1024:.1f} KiB in {stat.count})"
        )
        for frame in list(stat.traceback)[-6:]:
            lines.append(f"      {frame.filename}:{frame.lineno}")
    return lines


def _mib(snapshot: tracemalloc.Snapshot) -> float:
    return sum(trace.size for trace in snapshot.traces) / 2**20


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--from-minute", type=float, default=10.0)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    found = snapshots(args.directory)
    if len(found) < 2:
        print(f"fewer than two snapshots in {args.directory}")
        return 1
    start = next(((m, p) for m, p in found if m >= args.from_minute), found[0])
    end = found[-1]
    if start == end:
        start = found[0]
    loaded = {path: tracemalloc.Snapshot.load(str(path)) for _, path in found}
    print("Python heap held (traced), MiB by minute:", ", ".join(
        f"{minute:.1f}: {_mib(loaded[path]):.1f}" for minute, path in found))  # fmt: skip
    old, new = loaded[start[1]], loaded[end[1]]
    print(f"minute {start[0]:.1f} → {end[0]:.1f}: {_mib(old):.1f} → {_mib(new):.1f} MiB")
    for line in growth(old, new, args.top):
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
