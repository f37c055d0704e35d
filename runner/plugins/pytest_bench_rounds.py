"""A pytest plugin the runner adds to a foreign harness's benchmark step when it compares in
workers (`-p pytest_bench_rounds`, from a copy in the job's directory): one process per tree
stays alive and times round after round, so a round costs the benchmark's own time instead of
a process's start, its imports and its collection (tens of seconds on a large harness), and
both trees' rounds come from processes whose state is settled.

It acts only where `$BENCH_ROUNDS_DIR` is set:

- **Rounds.** After collection it does not run the tests once and exit: it waits for
  `round-<n>.request` (n = 1, 2, ...) in `$BENCH_ROUNDS_DIR` (the runner's directory, which
  the job may only read), runs every selected test through pytest's own protocol (fixtures,
  reports and the terminal as in a plain run), then writes `round-<n>.json` into
  `$BENCH_ROUNDS_OUT` (tmp + rename): `{"round": n, "pid": ..., "failed": bool, "tests": k,
  "device": "cuda" | "none", "timings": [{"host_ms": ..., "device_ms": ...}, ...]}`. Once
  collected it writes `ready.json` there (the runner starts a tree's further host processes
  beside its worker and asks the worker for nothing until they are ready). A `stop`
  file, the request directory vanishing, or no request for `$BENCH_ROUNDS_IDLE_S` (default
  600) ends the session normally. It looks for requests every `$BENCH_ROUNDS_POLL_S`
  (default 0.005; a host process, which waits through the rounds, looks less often).
- **The timer.** `triton.testing.do_bench` (which a harness looks up when it times) is
  replaced by `bench`: for the `fn` it is given it measures the host time per call (N calls
  back to back, one synchronization at the end, divided by N; the median of up to three) and
  the device time per call, returns the device time (ms) to the harness, so the harness's
  own records carry it, and appends both to the round's timings. `$BENCH_ROUNDS_TIMER_MS`
  (default 30) is the time one measurement may take, split between the two readings: rounds
  repeat, so each is short. A kernel autotuner choosing its configuration (Triton's, or a
  library's subclass of it) looks the timer up in the same place: its calls go to the timer
  that was there, and are not the round's (the harness's readings stay two a row).

It imports only pytest and the standard library at import; triton, which the job's own Python
has, when the rounds start, and torch when the timer is first called (a round's `device` is
"cuda" only where torch was imported, by the harness or the timer: a harness that never
imports it, as the runner's tests' do, is not made to import it). The runner reads its
answers as hostile.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

POLL_S = 0.005
DEFAULT_TIMER_MS = 30.0
DEFAULT_IDLE_S = 600.0
MAX_CALLS = 10_000  # back-to-back calls of one host reading, at most
MIN_HOST_CALLS = 4  # ...and at least: a cost paid every few calls is averaged in, not hit or missed
HOST_READINGS = 3  # a host time is the median of this many readings, the budget split among them
FLUSH_BYTES = 256 * 1024 * 1024  # more than any L2 cache: each device call starts cold

_timings: list[dict[str, float]] = []  # the current round's readings, in call order
_replaced: Callable[..., Any] | None = None  # the timer `bench` stands in for


def _env_float(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, ""))
    except ValueError:
        return default
    return value if value > 0 else default


def _torch() -> Any:
    import torch  # the job's Python has it; imported only once rounds start

    return torch


def _cuda(torch: Any) -> bool:
    return bool(torch.cuda.is_available())


_accelerators: dict[int, Any] = {}  # torch's id → its other accelerator's module (or None)


def _accelerator(torch: Any) -> Any:
    """The device module (`torch.<name>`) of an accelerator other than CUDA that torch reaches,
    as torch itself names it: its current accelerator (`torch.accelerator`), else the device a
    vendor's plugin registered as PrivateUse1 under its own name (torch.musa, torch.npu);
    None where none is available (the CPU). Looked up once."""
    if id(torch) not in _accelerators:
        names = []
        with contextlib.suppress(Exception):  # an older torch's, or one that cannot tell
            names.append(torch.accelerator.current_accelerator().type)
        with contextlib.suppress(Exception):
            names.append(torch._C._get_privateuse1_backend_name())
        found = None
        for name in (n for n in names if n and n not in ("cpu", "cuda")):
            module = getattr(torch, name, None)
            available = getattr(module, "is_available", None)
            if available is not None and available() and hasattr(module, "synchronize"):
                found = module
                break
        _accelerators[id(torch)] = found
    return _accelerators[id(torch)]


def _synchronize(torch: Any) -> None:
    """Wait for the device: CUDA's, else the other accelerator's torch reaches; nothing on
    the CPU."""
    if _cuda(torch):
        torch.cuda.synchronize()
        return
    module = _accelerator(torch)
    if module is not None:
        module.synchronize()


def _host_ms(fn: Callable[[], Any], torch: Any, budget_ms: float, estimate_ms: float) -> float:
    """Host time per call: the median of up to HOST_READINGS readings, each N calls back to
    back (at least MIN_HOST_CALLS), synchronized once, divided by N; the median, so one
    reading that met a collection or an interrupt does not stand for the row. The budget is
    split among them only where each still gets MIN_HOST_CALLS calls (slow calls: one)."""
    estimate_ms = max(estimate_ms, 1e-3)
    count = int(max(1, min(HOST_READINGS, budget_ms // (MIN_HOST_CALLS * estimate_ms))))
    calls = int(max(MIN_HOST_CALLS, min(MAX_CALLS, budget_ms / count / estimate_ms)))
    readings = []
    for _ in range(count):
        _synchronize(torch)
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        _synchronize(torch)
        readings.append((time.perf_counter() - started) * 1000 / calls)
    return statistics.median(readings)


def _single_ms(fn: Callable[[], Any], torch: Any) -> float:
    _synchronize(torch)
    started = time.perf_counter()
    fn()
    _synchronize(torch)
    return (time.perf_counter() - started) * 1000


def _wall_device_ms(
    fn: Callable[[], Any], torch: Any, budget_ms: float, estimate_ms: float
) -> float:
    """No CUDA device: device time is the host's, the median wall time of single calls
    (each synchronized where there is another accelerator)."""
    calls = int(max(3, min(MAX_CALLS, budget_ms / max(estimate_ms, 1e-3))))
    return statistics.median(_single_ms(fn, torch) for _ in range(calls))


class _Flush:
    """The L2 flush between timed device calls: a 256 MB int8 buffer zeroed. What it launches
    depends on the dispatch in force when it runs (a harness may route `zero_` or `fill_` to
    its own kernels while it times its side), so each measurement profiles a few flushes alone
    first, in the same context as the calls (`alone`)."""

    FLUSHES = 3

    def __init__(self, torch: Any) -> None:
        self.buffer = torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda")

    def run(self) -> None:
        self.buffer.zero_()

    def alone(self, torch: Any) -> list[tuple[str, float]]:
        """The device events of FLUSHES flushes, profiled by themselves."""
        with _profile(torch) as prof:
            for _ in range(self.FLUSHES):
                self.run()
            torch.cuda.synchronize()
        return _device_events(prof)


def own_device_ms(
    events: list[tuple[str, float]], flushes: list[tuple[str, float]], per_run: int, calls: int
) -> float:
    """A call's own device time from a profile of `calls` (flush, call) pairs: the events not
    named as the flush's are left out by name when exactly the flushes' share bears those
    names; where the call's own kernels share a name with the flush's (the flush and the
    operator both fill), the flushes' mean time measured alone (`flushes`, of `per_run`
    flushes) is taken off the total instead."""
    names = {name for name, _ in flushes}
    per_flush = len(flushes) / per_run if per_run else 0.0
    named = [ms for name, ms in events if name in names]
    if len(named) == round(per_flush * calls):
        return sum(ms for name, ms in events if name not in names) / calls
    flush_ms = sum(ms for _, ms in flushes) / per_run if per_run else 0.0
    return max(0.0, sum(ms for _, ms in events) / calls - flush_ms)


_flush: _Flush | None = None


def _profile(torch: Any) -> Any:
    from torch.profiler import ProfilerActivity, profile

    return profile(activities=[ProfilerActivity.CUDA])


def _device_events(prof: Any) -> list[tuple[str, float]]:
    """(name, duration in ms) of every event the device ran in a profile (kernels, copies,
    sets), from the profiler's raw records."""
    found = []
    for event in prof.profiler.kineto_results.events():
        if str(event.device_type()).rsplit(".", 1)[-1] != "CUDA":
            continue
        found.append((event.name(), event.duration_ns() / 1e6))
    return found


def _cuda_device_ms(
    fn: Callable[[], Any], torch: Any, budget_ms: float, estimate_ms: float
) -> float:
    """CUDA: the kernels' own durations, as the profiler records them, summed over M calls
    each after an L2 flush, divided by M (the flush's kernels left out): what the device spent
    on a call, free of the host time between launches that events around a call would hold."""
    global _flush
    if _flush is None:
        _flush = _Flush(torch)
    calls = int(max(1, min(1000, budget_ms / max(estimate_ms, 1e-3))))
    flushes = _flush.alone(torch)
    with _profile(torch) as prof:
        for _ in range(calls):
            _flush.run()
            fn()
        torch.cuda.synchronize()
    return own_device_ms(_device_events(prof), flushes, _Flush.FLUSHES, calls)


def bench(fn: Callable[[], Any], *args: Any, grad_to_none: Any = None, **kwargs: Any) -> float:
    """`triton.testing.do_bench`'s stand-in: the device time per call of `fn` (ms); warmup,
    rep, quantiles and return_mode are accepted and ignored (the budget is the runner's)."""
    if _replaced is not None and _tuning(sys._getframe(1)):
        return _replaced(fn, *args, grad_to_none=grad_to_none, **kwargs)
    torch = _torch()
    budget = _env_float("BENCH_ROUNDS_TIMER_MS", DEFAULT_TIMER_MS)

    def call() -> Any:
        if grad_to_none is not None:
            for tensor in grad_to_none:
                tensor.grad = None
        return fn()

    estimate = _single_ms(call, torch)  # the first call also warms: compiles, caches
    estimate = min(estimate, _single_ms(call, torch))
    host = _host_ms(call, torch, budget / 2, estimate)
    measure = _cuda_device_ms if _cuda(torch) else _wall_device_ms
    device = measure(call, torch, budget / 2, estimate)
    _timings.append({"host_ms": host, "device_ms": device})
    return device


def _tuning(frame: Any) -> bool:
    """Whether a call from `frame` is made on behalf of a kernel autotuner (an instance of
    Triton's `Autotuner`, or of a subclass, is `self` somewhere up the stack)."""
    try:
        from triton.runtime.autotuner import Autotuner
    except ImportError:
        return False
    while frame is not None:
        if isinstance(frame.f_locals.get("self"), Autotuner):
            return True
        frame = frame.f_back
    return False


def _write_json(directory: str, name: str, record: dict[str, Any]) -> None:
    """Write atomically: the runner never sees half an answer."""
    tmp = os.path.join(directory, f".{name}.tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(record, handle)
    os.replace(tmp, os.path.join(directory, name))


class _Rounds:
    def __init__(self, requests: str, answers: str) -> None:
        self.requests, self.answers = requests, answers
        self.idle_s = _env_float("BENCH_ROUNDS_IDLE_S", DEFAULT_IDLE_S)
        self.failed = False

    def next_request(self, number: int) -> bool:
        """Wait for round `number`'s request: True when it came, False to end."""
        deadline = time.monotonic() + self.idle_s
        request = os.path.join(self.requests, f"round-{number}.request")
        stop = os.path.join(self.requests, "stop")
        poll_s = _env_float("BENCH_ROUNDS_POLL_S", POLL_S)
        while time.monotonic() < deadline:
            if os.path.exists(stop) or not os.path.isdir(self.requests):
                return False
            if os.path.exists(request):
                return True
            time.sleep(poll_s)
        return False

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        if session.testsfailed and not session.config.option.continue_on_collection_errors:
            raise session.Interrupted(f"{session.testsfailed} errors during collection")
        if session.config.option.collectonly:
            return True
        _patch_do_bench()
        items = list(session.items)
        # Collected and configured (whatever the harness opens, it has opened): ready.
        _write_json(self.answers, "ready.json", {"pid": os.getpid(), "tests": len(items)})
        number = 1
        while self.next_request(number):
            _timings.clear()
            self.failed = False
            for index, item in enumerate(items):
                nextitem = _next(items, index)
                item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
                if session.shouldstop or session.shouldfail:
                    break
            _write_json(
                self.answers,
                f"round-{number}.json",
                {
                    "round": number,
                    "pid": os.getpid(),
                    "failed": self.failed or bool(session.shouldfail),
                    "tests": len(items),
                    "device": _device(),
                    "timings": list(_timings),
                },
            )
            if session.shouldstop or session.shouldfail:
                break
            number += 1
        if items:  # tear down what the last round left set up
            session._setupstate.teardown_exact(None)
        return True

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.failed:
            self.failed = True


def _device() -> str:
    """The round's device: CUDA where torch, as the harness or the timer imported it, reaches
    it; "none" where nothing imported torch (nothing of the round ran on a device)."""
    torch = sys.modules.get("torch")
    return "cuda" if torch is not None and _cuda(torch) else "none"


def _next(items: list[pytest.Item], index: int) -> pytest.Node:
    """What follows a test, for its teardown: the next test; after the last, the first again
    (the next round's), so what the two share stays set up across rounds; the only test's
    own parent, so its function-scoped fixtures still end and start again."""
    if index + 1 < len(items):
        return items[index + 1]
    if len(items) > 1:
        return items[0]
    return items[index].parent or items[index]


def _patch_do_bench() -> None:
    """Put `bench` where a harness looks the timer up; nothing where triton is missing."""
    global _replaced
    try:
        import triton.testing
    except ImportError:
        return
    if triton.testing.do_bench is not bench:
        _replaced = triton.testing.do_bench
    triton.testing.do_bench = bench


def pytest_configure(config: pytest.Config) -> None:
    requests = os.environ.get("BENCH_ROUNDS_DIR")
    answers = os.environ.get("BENCH_ROUNDS_OUT") or requests
    if requests and answers and not hasattr(config, "workerinput"):
        _patch_do_bench()  # before collection: a module binding `do_bench` at import gets ours
        config.pluginmanager.register(_Rounds(requests, answers), "bench-rounds")
