"""Where the suite's CPU goes: a pytest plugin that records each test's CPU seconds (its own
process and the children it waited for) and wall seconds, one JSON line a test, then sums them
by file.

    python -m pytest -n 4 -p tools.pytest_cpu        # lines under $PYTEST_CPU_DIR (/tmp/pytest-cpu)
    python -m tools.pytest_cpu [DIR]                  # CPU and wall seconds by file, largest first
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

DIR = Path(os.environ.get("PYTEST_CPU_DIR", "/tmp/pytest-cpu"))
_out: IO[str] | None = None


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(
        resource.RUSAGE_CHILDREN
    )
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: Any) -> Iterator[None]:
    global _out
    if _out is None:
        DIR.mkdir(parents=True, exist_ok=True)
        _out = (DIR / f"{os.getpid()}.jsonl").open("a")
    cpu, wall, started = _cpu(), time.monotonic(), time.time()
    yield
    spent = [item.nodeid, _cpu() - cpu, time.monotonic() - wall, started]
    _out.write(json.dumps(spent) + "\n")
    _out.flush()


def main(directory: Path = DIR) -> None:
    by_file: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
    for path in directory.glob("*.jsonl"):
        for line in path.read_text().splitlines():
            nodeid, cpu, wall = json.loads(line)[:3]
            entry = by_file[nodeid.split("::")[0]]
            entry[0] += cpu
            entry[1] += wall
            entry[2] += 1
    print(f"{'cpu s':>8} {'wall s':>8} {'tests':>6}  file")
    for name, (cpu, wall, count) in sorted(by_file.items(), key=lambda kv: -kv[1][0]):
        print(f"{cpu:8.1f} {wall:8.1f} {int(count):6d}  {name}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DIR)
