"""tools.bars: the performance bars computed from harness JSON rows."""

from __future__ import annotations

import json
from pathlib import Path

from kernels.benchmark.sizes import LARGE, TINY
from tools import bars


def doc(speedup: float, fraction: float, sizes: tuple = LARGE + TINY) -> dict:
    return {
        "rows": [
            {
                "dtype": "float16",
                "size": list(shape),
                "output_size": list(out),
                "reference_ms": speedup * 0.01,
                "kernel_ms": 0.01,
                "speedup": speedup,
                "bandwidth_fraction": fraction,
            }
            for shape, out in sizes
        ]
    }


def test_backward_bars_met_and_missed() -> None:
    good = {b.name: b for b in bars.backward_bars(doc(2.5, 0.9))}
    assert all(b.met for b in good.values()) and len(good) == 3
    bad = doc(2.5, 0.9)
    bad["rows"][0]["speedup"] = 0.9  # one large row slower than PyTorch
    verdict = {b.name: b.met for b in bars.backward_bars(bad)}
    assert not verdict["backward, large: no row slower than PyTorch"]
    assert verdict["backward, large: geometric mean speedup >= 1.6"]
    low = {b.name: b for b in bars.backward_bars(doc(1.4, 0.9))}
    assert not low["backward, large: geometric mean speedup >= 1.6"].met
    assert not low["backward, tiny: every row >= 1.5x faster"].met


def test_host_time_reach_and_verdict_bars(tmp_path: Path) -> None:
    timed = doc(2.5, 0.9)
    for row in timed["rows"]:
        row["reference_host_us"], row["kernel_host_us"] = 14.0, 12.0
    timed["rows"][-1]["kernel_host_us"] = 21.0  # one tiny row slower on the host
    (host,) = [b for b in bars.backward_bars(timed) if "host" in b.name]
    assert not host.met and host.measured == f"{len(TINY) - 1} of {len(TINY)}; worst 1.50 x"
    mover = {"op": "adaptive_max_pool3d", "flush": "zero", "mover_us": 10.0}
    bounds = {
        "rows": [
            {**mover, "ours_us": 12.0},
            {**mover, "ours_us": 13.0},
            {**mover, "flush": "read", "ours_us": 99.0},
        ]
    }
    (reach,) = bars.reach_bars(bounds)
    assert not reach.met and reach.measured == "1 of 2; worst 1.30 x"
    # The same bar from a benchmark run with --reach: its large rows carry the mover's time.
    timed["op"] = "adaptive_max_pool3d_backward"
    assert bars.benchmark_reach_bars(timed) == []  # run without --reach
    for row in timed["rows"]:
        row["reach_ms"] = row["kernel_ms"] / 3.0  # the tiny rows are not part of the bar
    large = bars._rows(timed, LARGE)
    for i, row in enumerate(large):
        row["reach_ms"] = row["kernel_ms"] / (1.4 if i == 0 else 1.1)
    (from_rows,) = bars.benchmark_reach_bars(timed)
    assert from_rows.name == "adaptive_max_pool3d_backward, large: every row <= 1.25 x the mover"
    assert (from_rows.met, from_rows.measured) == (
        False,
        f"{len(large) - 1} of {len(large)}; worst 1.40 x",
    )
    run = {
        "status": "succeeded", "sha": "a" * 40,
        "environment": {"vendor": "nvidia", "runner_name": "r", "runner_version": "0"},
        "started_at": "2026-12-01T10:00:00Z",
    }  # fmt: skip
    (tmp_path / "fresh.json").write_text(json.dumps({**run, "finished_at": "2026-12-01T10:01:00Z"}))
    (tmp_path / "warm.json").write_text(json.dumps({**run, "finished_at": "2026-12-01T10:00:31Z"}))
    fresh, warm = bars.verdict_bars(
        [f"fresh={tmp_path / 'fresh.json'}", f"warm={tmp_path / 'warm.json'}"]
    )
    assert (fresh.met, fresh.measured) == (True, "60.0 s")
    assert (warm.met, warm.measured) == (False, "31.0 s")


def test_forward_and_vendor_bars(tmp_path: Path) -> None:
    assert all(b.met for b in bars.forward_bars(doc(3.5, 0.7)))
    assert not bars.forward_bars(doc(0.9, 0.7))[0].met
    generic, mthreads = doc(2.0, 0.8), doc(2.0, 0.8)
    for row in mthreads["rows"]:
        row["kernel_ms"] = 0.0106  # 6% slower than generic's 0.01
    mthreads["rows"][0]["kernel_ms"] = 0.0104  # one row within 5%
    (vendor,) = bars.vendor_bar(generic, mthreads)
    n = len(LARGE + TINY)
    assert not vendor.met and vendor.measured == f"1 of {n}; worst 1.060 x"
    (close,) = bars.vendor_bar(generic, {"rows": mthreads["rows"][:1]})
    assert close.met
    files = {}
    for name, data in {"b": doc(2.5, 0.9), "f": doc(3.5, 0.7)}.items():
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(json.dumps(data))
    assert bars.main(["--backward", str(files["b"]), "--forward", str(files["f"])]) == 0
    files["f"].write_text(json.dumps(doc(0.5, 0.7)))
    assert bars.main(["--backward", str(files["b"]), "--forward", str(files["f"])]) == 1


def test_do_bench_bar() -> None:
    row = {"op": "backward", "repeats": 5, "speedup_median": 1.62}
    rows = [row, {**row, "speedup_median": 1.48}, {**row, "op": "forward", "speedup_median": 1.0}]
    (bar,) = bars.do_bench_bar({"do_bench": rows})
    assert not bar.met and bar.measured == "1 of 2; worst 1.48 x"
    assert bar.name == "backward, tiny: every row >= 1.5x under do_bench (5 runs)"
    (bar,) = bars.do_bench_bar({"do_bench": rows[:1]})
    assert bar.met
    assert bars.do_bench_bar({"do_bench": rows[2:]}) == []
