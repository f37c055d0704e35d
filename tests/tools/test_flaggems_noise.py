"""The reader of the FlagGems noise probe, on made-up outputs with known spreads: FlagGems'
record logs (between processes, the first against the rest, within one process per harness
mode, beside `procN.txt` files that are no processes), the driver's JSON lines and the clock
log; and the driver's own logic on its host-only stand-in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tools import flaggems_noise_driver as driver
from tools.flaggems_noise import load_driver, main, records

OP = "op"
SHAPE = [[1, 1, 4, 4, 4], [1, 1, 8, 8, 8]]


def _log(path: Path, latencies: list[float], mode: str = "kernel") -> None:
    """One FlagGems record line per latency, as `--record log` writes them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [
        "[INFO] Benchmark record logger enabled",
        *(
            "[INFO] "
            + json.dumps(
                {
                    "op_name": OP,
                    "dtype": "torch.float16",
                    "mode": mode,
                    "result": [{"latency_base": 0.0065, "latency": lat, "shape_detail": SHAPE}],
                }
            )
            for lat in latencies
        ),
    ]
    path.write_text("\n".join(lines) + "\n")


def _row(out: str, prefix: str, section: str = "") -> str:
    """The one line starting with `prefix` in the table under the line holding `section`."""
    if section:
        out = out.split(section, 1)[1].split("\n\n", 1)[0]
    found = [line for line in out.splitlines() if line.startswith(prefix)]
    assert len(found) == 1, out
    return found[0]


def test_record_logs_between_first_and_within_per_mode(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for i, latency in enumerate([0.40, 0.10, 0.11, 0.10], start=1):
        _log(tmp_path / f"proc{i}" / "result_x.log", [latency])
        (tmp_path / f"proc{i}.txt").write_text("pytest's output, not a process\n")
    (tmp_path / "proc12.txt").write_text("")  # no directory: not a process either
    # One process, two repeats of each mode interleaved, as the generated file runs them.
    inproc = tmp_path / "inproc" / "result_y.log"
    _log(inproc, [0.10, 0.20, 0.12, 0.30], mode="kernel")
    modes = ["kernel", "wrapper", "kernel", "wrapper"]
    lines = inproc.read_text().splitlines()
    inproc.write_text(
        "\n".join(
            [
                lines[0],
                *(ln.replace('"kernel"', f'"{m}"') for ln, m in zip(lines[1:], modes, strict=True)),
            ]
        )
    )
    got = records(inproc, OP)
    assert [(r["mode"], r["latency"]) for r in got] == [
        ("kernel", 0.10), ("wrapper", 0.20), ("kernel", 0.12), ("wrapper", 0.30),
    ]  # fmt: skip
    assert records(inproc, "other") == []
    main(tmp_path, OP)
    out = capsys.readouterr().out
    assert "harness: 4 processes" in out
    row = _row(out, "float16 ")
    # Between: median 0.105, spread 4.00x; the first is 4.00x the rest's median; torch 1.00x;
    # within: kernel 0.11 (1.20x), wrapper 0.25 (1.50x).
    assert "0.1050 x4.00" in row and " 4.00 " in row and "0.0065 x1.00" in row
    assert "0.1100 x1.20" in row and "0.2500 x1.50" in row


def _case(name: str, kernel_first: float, kernel: list[float], host: float, device: float):
    return {
        "kind": "case",
        "name": name,
        "start": "2026-12-05T10:00:00.000",
        "end": "2026-12-05T10:00:01.000",
        "kernel_first": kernel_first,
        "kernel": kernel,
        "host": [host] * 3,
        "launch": [host] * 3,
        "events": [host] * 3,
        "loop_flush": [kernel_first] * 3,
        "loop_pad": [device] * 3,
        "loop_none": [host] * 3,
        "profile": {"device_ms": device, "kernels": 3.0, "names": {"k": 1.0}},
        "wrapper": host,
        "operator": host,
        "tuning": {"(64,)": "BLOCK_SIZE: 16"},
    }


def test_driver_lines_spreads_model_cpus_and_clocks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "driver"
    folder.mkdir()
    # Three processes: the host time per call doubles each time, the device's stays; the
    # flush hides 0.05 ms, so the model reads 0.01 + host - 0.05.
    for i, host in enumerate([0.10, 0.20, 0.40], start=1):
        kernel = 0.01 + host - 0.05
        lines = [
            {"kind": "process", "flush_ms": 0.05, "cpu": i, "python_ms": 4.0},
            _case("small", kernel, [kernel, kernel * 1.1, kernel * 1.2], host, 0.01),
            {"kind": "cpus", "case": "small", "rows": [
                {"cpu": 0, "python_ms": 4.0, "host": 0.1, "kernel": 0.06},
                {"cpu": 1, "python_ms": 8.0, "host": 0.2 * i, "kernel": 0.15 * i},
            ]},
            {"kind": "graph", "rows": {"small": [0.004, 0.004, 0.004]}},
        ]  # fmt: skip
        (folder / f"proc{i}.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    (folder / "proc1.txt").write_text("the process's output\n")
    (folder / "warm.jsonl").write_text(json.dumps(_case("small", 9, [9], 9, 9)) + "\n")
    (tmp_path / "smi.csv").write_text(
        "timestamp, clocks.current.sm [MHz], clocks.current.memory [MHz], "
        "clocks_event_reasons.active, temperature.gpu, power.draw [W]\n"
        "2026/12/05 10:00:00.500, 1980 MHz, 3201 MHz, 0x0000000000000000, 40, 120.00 W\n"
        "2026/12/05 10:00:00.600, 1755 MHz, 3201 MHz, 0x0000000000000004, 41, 300.00 W\n"
        "2026/12/05 10:00:05.000, 345 MHz, 3201 MHz, 0x0000000000000001, 35, 80.00 W\n"
    )
    assert [p["name"] for p in load_driver(tmp_path)] == ["proc1", "proc2", "proc3"]
    main(tmp_path, OP)
    out = capsys.readouterr().out
    assert "driver: 3 processes" in out
    row = _row(out, "small ", "per case, ms")
    # kernel 0.06 / 0.16 / 0.36: median 0.16, 6.00x; within 1.20x; host 4.00x; device and
    # pad 1.00x; the model meets the kernel exactly (ratio 1.00).
    assert "0.1600 x6.00" in row and "x1.20 x1.20" in row and "0.2000 x4.00" in row
    assert "0.0100 x1.00" in row and row.endswith(" 1.00")
    cpus = out.split("pinned to each CPU")[1].split("\n\n", 1)[0]
    assert "   0     4.0000 x1.00     0.1000 x1.00     0.0600 x1.00" in cpus
    assert "r = 0.99" in cpus or "r = 1.00" in cpus
    assert "0.0040 x1.00" in _row(out, "small ", "the harness's modes")
    clocks = _row(out, "small ", "GPU while each case ran")
    # Two samples fall in the case's window in each process's (the same) window: six in all.
    assert "n=  6" in clocks and "sm 1755/1868/1980" in clocks and "0x0000000000000004" in clocks


def test_driver_logic_on_the_stand_in(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "driver" / "proc1.jsonl"
    driver.main(["--fake", "--out", str(out), "--only", "gems-bwd-f16-s", "--repeats", "2"])
    kinds = [json.loads(line)["kind"] for line in out.read_text().splitlines()]
    assert kinds == ["process", "case", "cpus", "graph"]
    (proc,) = load_driver(tmp_path)
    case = proc["cases"]["gems-bwd-f16-s"]
    # The stand-in spins 50 µs on the host, takes 5 µs on the 'device' and the flush hides
    # 20 µs: kernel mode reads 35 µs, the padded loop 5 µs, the host about 50 µs.
    assert case["kernel_first"] == pytest.approx(0.035) and len(case["kernel"]) == 2
    assert driver.median(case["loop_pad"]) == pytest.approx(0.005)
    # A wall clock: at least the spin, and more on a busy host (0.37 ms once, with eight test
    # workers on two cores), but not another order of magnitude.
    assert 0.045 < driver.median(case["host"]) < 2.0
    assert "no graphs" in proc["graph"]["error"]
    capsys.readouterr()
    main(tmp_path, OP)
    assert "gems-bwd-f16-s" in capsys.readouterr().out
