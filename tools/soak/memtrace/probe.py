"""A light look at a process's memory, taken from inside it every `SOAK_PROBE_EVERY_S` seconds
(default 60) and appended as one JSON line to `SOAK_PROBE_FILE` (the soak's witness replica
loads it through `sitecustomize`): what the kernel sees (RSS, anonymous RSS, threads, open file
descriptors, memory mappings), what glibc's allocator holds (`mallinfo2`: its arenas' bytes in
use and free, its mmapped chunks; `malloc_info`: how many arenas and each one's size) and what
Python holds (`sys.getallocatedblocks`, its small-object allocator's arenas, the threads by
name). A sample takes tens of milliseconds (most of it the two allocators' accounts) and keeps
nothing."""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import re
import sys
import tempfile
import threading
import time
from collections import Counter
from typing import Any


class _Mallinfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


_libc: ctypes.CDLL | None
try:
    _libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    _libc.mallinfo2.restype = _Mallinfo2
    _libc.fopen.restype = ctypes.c_void_p
    _libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    _libc.fclose.argtypes = [ctypes.c_void_p]
    _libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
except (OSError, AttributeError):  # not glibc, or one older than 2.33
    _libc = None
try:  # CPython's small-object allocator's own account, written to a FILE *
    _obmalloc_stats = ctypes.pythonapi._PyObject_DebugMallocStats
    _obmalloc_stats.argtypes = [ctypes.c_void_p]
except AttributeError:  # another Python
    _obmalloc_stats = None

HEAP = re.compile(r'<heap nr="(\d+)">.*?<system type="current" size="(\d+)"/>', re.S)
TOTAL_FREE = re.compile(r'<total type="rest" count="\d+" size="(\d+)"/>')
DIGITS = re.compile(r"[-_ ]?\d+")


def _status() -> dict[str, int]:
    wanted = {"VmRSS": "rss_kib", "RssAnon": "anon_kib", "VmHWM": "hwm_kib", "Threads": "threads",
              "VmSize": "vm_kib"}  # fmt: skip
    out = {}
    with open("/proc/self/status") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in wanted:
                out[wanted[key]] = int(value.split()[0])
    return out


def _written(write: Any) -> str:
    """What `write(FILE *)` writes, through a temporary file (libc's own stdio)."""
    assert _libc is not None
    with tempfile.NamedTemporaryFile("r", suffix=".txt") as out:
        handle = _libc.fopen(out.name.encode(), b"w")
        if not handle:
            return ""
        write(handle)
        _libc.fclose(handle)
        return out.read()


def _arenas() -> list[int]:
    """Each glibc arena's size in KiB (`malloc_info`: arena 0 is the main one)."""
    text = _written(lambda handle: _libc.malloc_info(0, handle))  # type: ignore[union-attr]
    return [int(size) // 1024 for _, size in HEAP.findall(text)]


OBMALLOC = {
    "ob_arenas": re.compile(r"# arenas allocated current\s*=\s*([\d,]+)"),
    "ob_arenas_peak": re.compile(r"# arenas highwater mark\s*=\s*([\d,]+)"),
    "ob_used_kib": re.compile(r"# bytes in allocated blocks\s*=\s*([\d,]+)"),
    "ob_free_kib": re.compile(r"# bytes in available blocks\s*=\s*([\d,]+)"),
}


def _obmalloc() -> dict[str, int]:
    """Python's small-object allocator: its 1 MiB arenas now and at most (mmapped outside
    glibc's), and the bytes in blocks in use and free inside them."""
    if _obmalloc_stats is None or _libc is None:
        return {}
    text = _written(_obmalloc_stats)
    out = {}
    for key, pattern in OBMALLOC.items():
        match = pattern.search(text)
        if match:
            value = int(match.group(1).replace(",", ""))
            out[key] = value // 1024 if key.endswith("_kib") else value
    return out


def sample() -> dict[str, Any]:
    """One look at this process now."""
    found: dict[str, Any] = {"at": round(time.time(), 1), **_status()}
    found["fds"] = len(os.listdir("/proc/self/fd"))
    with open("/proc/self/maps") as maps:
        found["maps"] = sum(1 for _ in maps)
    found["py_blocks"] = sys.getallocatedblocks()
    found["py_threads"] = dict(
        Counter(DIGITS.sub("", t.name) for t in threading.enumerate()).most_common()
    )
    if _libc is not None:
        info = _libc.mallinfo2()
        for name in ("arena", "uordblks", "fordblks", "hblkhd", "keepcost"):  # bytes
            found[f"m_{name}_kib"] = getattr(info, name) // 1024
        for name in ("hblks", "ordblks"):  # counts
            found[f"m_{name}"] = getattr(info, name)
        found["arenas_kib"] = _arenas()
    found.update(_obmalloc())
    return found


def _loop(path: str, every_s: float) -> None:
    started = time.monotonic()
    while True:
        try:
            line = {"s": round(time.monotonic() - started, 1), **sample()}
            with open(path, "a") as out:
                out.write(json.dumps(line) + "\n")
        except Exception as exc:  # a probe never takes its process down
            print(f"soak probe: {exc!r}", file=sys.stderr)
        time.sleep(every_s)


def start_from_env() -> None:
    """Start sampling on a daemon thread when `SOAK_PROBE_FILE` is set."""
    path = os.environ.get("SOAK_PROBE_FILE")
    if path:
        every = float(os.environ.get("SOAK_PROBE_EVERY_S", "60"))
        threading.Thread(target=_loop, args=(path, every), name="soak-probe", daemon=True).start()
