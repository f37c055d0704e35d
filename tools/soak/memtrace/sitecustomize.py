"""Loaded by a soak replica's Python when this folder is on its PYTHONPATH (`--trace-memory`):
traces its allocations from the start (tracemalloc, `SOAK_TRACE_FRAMES` frames deep) and
dumps a snapshot into `SOAK_TRACE_MEMORY_DIR` every `SOAK_TRACE_EVERY_S` seconds, named by the
seconds since start, for `python -m tools.soak.memdiff DIR`; with `SOAK_PROBE_FILE` set,
appends a light look at its memory there each minute (probe.py). Nothing happens without
either set."""

import os
import threading
import time
import tracemalloc

# The light probe first (`SOAK_PROBE_FILE`; memtrace/probe.py), so that its imports are not
# among what the tracer sees grow. This folder is on the path: that is how we were loaded.
from probe import start_from_env


def _dump_every(directory: str, every_s: float) -> None:
    started = time.monotonic()
    while True:
        time.sleep(every_s)
        seconds = time.monotonic() - started
        snapshot = tracemalloc.take_snapshot().filter_traces(
            [tracemalloc.Filter(False, tracemalloc.__file__)]
        )
        path = os.path.join(directory, f"at-{seconds:09.1f}s.tracemalloc")
        snapshot.dump(path + ".tmp")
        os.replace(path + ".tmp", path)


start_from_env()
_directory = os.environ.get("SOAK_TRACE_MEMORY_DIR")
if _directory:
    os.makedirs(_directory, exist_ok=True)
    tracemalloc.start(int(os.environ.get("SOAK_TRACE_FRAMES", "8")))
    threading.Thread(
        target=_dump_every,
        args=(_directory, float(os.environ.get("SOAK_TRACE_EVERY_S", "300"))),
        name="soak-memtrace",
        daemon=True,
    ).start()
