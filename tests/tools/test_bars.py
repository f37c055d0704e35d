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
    assert all(b.met for b in good.values()) and len(good) == 4
    bad = doc(2.5, 0.9)
    bad["rows"][0]["speedup"] = 0.9  # one large row slower than PyTorch
    verdict = {b.name: b.met for b in bars.backward_bars(bad)}
    assert not verdict["backward, large: no row slower than PyTorch"]
    assert verdict["backward, large: geometric mean speedup >= 2.0"]
    slow_floor = {b.name: b for b in bars.backward_bars(doc(2.5, 0.5))}
    assert not slow_floor["backward, large: median <= 1.25 x floor"].met
    assert slow_floor["backward, large: median <= 1.25 x floor"].measured == "2.00 x"


def test_forward_and_vendor_bars(tmp_path: Path) -> None:
    assert all(b.met for b in bars.forward_bars(doc(3.5, 0.7)))
    assert not bars.forward_bars(doc(2.0, 0.7))[0].met
    generic, mthreads = doc(2.0, 0.8), doc(2.0, 0.8)
    for row in mthreads["rows"]:
        row["kernel_ms"] = 0.0115  # 15% slower than generic's 0.01
    (vendor,) = bars.vendor_bar(generic, mthreads)
    assert not vendor.met and vendor.measured == "worst 1.15 x generic"
    files = {}
    for name, data in {"b": doc(2.5, 0.9), "f": doc(3.5, 0.7)}.items():
        files[name] = tmp_path / f"{name}.json"
        files[name].write_text(json.dumps(data))
    assert bars.main(["--backward", str(files["b"]), "--forward", str(files["f"])]) == 0
    files["f"].write_text(json.dumps(doc(1.0, 0.7)))
    assert bars.main(["--backward", str(files["b"]), "--forward", str(files["f"])]) == 1
