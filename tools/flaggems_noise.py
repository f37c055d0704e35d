"""Where the noise of FlagGems' benchmark comes from: the tables of what
`tools/gpu_flaggems_noise.sh` leaves in a directory.

- `driver/procN.jsonl` (tools/flaggems_noise_driver.py, one process each): per case, the
  harness's `kernel` latency between processes and within one, host time per call against
  the device's (profiler, events, do_bench's loop with a device pad), the model
  `device + max(0, launch - flush)`, the harness's modes, the first case per CPU, and the
  GPU's clocks while each case ran (`smi.csv`);
- `procN/result*.log` (FlagGems' record logs, one process each; `procN.txt` beside them are
  their outputs, not processes) and `inproc/result*.log` (one process, the benchmark run K
  times, its modes in turn): per row, the spread between processes, the first process
  against the rest, within the process per mode, and torch's rows between processes.

Spreads are `median xS` with S = max / min; `cv` is the standard deviation over the mean.

    python -m tools.flaggems_noise DIR OP
"""

from __future__ import annotations

import csv
import json
import re
import statistics
import sys
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

PROCESS_DIR = re.compile(r"proc(\d+)")
PROCESS_LOG = re.compile(r"proc(\d+)\.jsonl")


def spread(values: list[float]) -> str:
    """`median xmax/min` of the positive values; `-` for none."""
    values = [v for v in values if v is not None and v > 0]
    if not values:
        return "-"
    return f"{statistics.median(values):.4f} x{max(values) / min(values):.2f}"


def cv(values: list[float]) -> str:
    """The coefficient of variation in percent; `-` under two values."""
    values = [v for v in values if v is not None]
    if len(values) < 2 or not statistics.mean(values):
        return "-"
    return f"{100 * statistics.stdev(values) / statistics.mean(values):.0f}%"


def med(values: list[float]) -> float:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else float("nan")


def numbered(parent: Path, pattern: re.Pattern[str], dirs: bool) -> list[Path]:
    """The entries of `parent` whose whole name matches `pattern`, in numeric order:
    directories or files as `dirs` says (so `proc3.txt` is no process directory)."""
    found = [
        p
        for p in parent.glob("*")
        if (p.is_dir() if dirs else p.is_file()) and pattern.fullmatch(p.name)
    ]
    return sorted(found, key=lambda p: int(pattern.fullmatch(p.name).group(1)))  # type: ignore[union-attr]


# ---- the driver's JSON lines ------------------------------------------------------------


def load_driver(out: Path) -> list[dict[str, Any]]:
    """Each process's records: {"process": {...}, "cases": {name: {...}}, "cpus": {...},
    "graph": {...}}, in process order."""
    processes = []
    for path in numbered(out / "driver", PROCESS_LOG, dirs=False):
        proc: dict[str, Any] = {"name": path.stem, "cases": {}, "cpus": None, "graph": None}
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            kind = record.get("kind")
            if kind == "process":
                proc["process"] = record
            elif kind == "case":
                proc["cases"][record["name"]] = record
            elif kind in ("cpus", "graph"):
                proc[kind] = record
        processes.append(proc)
    return processes


def model_ms(case: dict[str, Any], flush_ms: float) -> float | None:
    """What the flush-then-time loop reads if the host's launch time past the flush leaks
    into the events: device + max(0, launch - flush)."""
    device = (case.get("profile") or {}).get("device_ms")
    if device is None:
        return None
    return device + max(0.0, med(case["launch"]) - flush_ms)


def within_spread(case: dict[str, Any]) -> float:
    reps = case["kernel"]
    return max(reps) / min(reps) if reps and min(reps) > 0 else float("nan")


def driver_tables(processes: list[dict[str, Any]]) -> list[str]:
    """The driver's tables, as lines."""
    lines = [f"driver: {len(processes)} processes"]
    names = list(dict.fromkeys(n for p in processes for n in p["cases"]))
    flush = [p["process"].get("flush_ms") for p in processes if "process" in p]
    lines.append(f"flush (256 MB zero_, events over 50): {spread(flush)} ms")
    lines.append("")
    lines.append(
        "per case, ms: harness kernel mode (warm-up 1000) between processes, cv; within a "
        "process (x max/min of the repeats: median, worst); host per call; launch (no wait); "
        "profiler device per call; do_bench loop with device pad; model device+max(0,launch-flush)"
    )
    head = (
        f"{'case':18} {'kernel between':>16} {'cv':>4} {'within':>11} {'host':>16} "
        f"{'launch':>16} {'device':>16} {'pad':>16} {'model':>7} {'kern/model':>10}"
    )
    lines.append(head)
    for name in names:
        rows = [(p, p["cases"][name]) for p in processes if name in p["cases"]]
        kernel = [c["kernel_first"] for _, c in rows]
        within = [within_spread(c) for _, c in rows]
        models = [model_ms(c, p["process"]["flush_ms"]) for p, c in rows]
        ratio = [k / m for k, m in zip(kernel, models, strict=True) if m is not None and m > 0]
        lines.append(
            f"{name:18} {spread(kernel):>16} {cv(kernel):>4} "
            f"{f'x{med(within):.2f} x{max(within):.2f}':>11} "
            f"{spread([med(c['host']) for _, c in rows]):>16} "
            f"{spread([med(c['launch']) for _, c in rows]):>16} "
            f"{spread([(c.get('profile') or {}).get('device_ms') for _, c in rows]):>16} "
            f"{spread([med(c['loop_pad']) for _, c in rows]):>16} "
            f"{med([m for m in models if m is not None]):7.4f} {med(ratio):10.2f}"
        )
    lines.append("")
    lines.append(
        "the harness's modes, ms between processes (kernel: the repeats' median; "
        "cudagraph: graph replays, no flush); events around a batch; do_bench's loop without "
        "flush"
    )
    lines.append(
        f"{'case':18} {'kernel':>16} {'wrapper':>16} {'operator':>16} {'cudagraph':>16} "
        f"{'events':>16} {'loop none':>16} {'loop flush':>16}"
    )
    for name in names:
        rows = [p["cases"][name] for p in processes if name in p["cases"]]
        graph = [
            med(g)
            for p in processes
            for n, g in ((p["graph"] or {}).get("rows") or {}).items()
            if n == name
        ]
        lines.append(
            f"{name:18} {spread([med(c['kernel']) for c in rows]):>16} "
            f"{spread([c.get('wrapper') for c in rows]):>16} "
            f"{spread([c.get('operator') for c in rows]):>16} {spread(graph):>16} "
            f"{spread([med(c['events']) for c in rows]):>16} "
            f"{spread([med(c['loop_none']) for c in rows]):>16} "
            f"{spread([med(c['loop_flush']) for c in rows]):>16}"
        )
    errors = [
        f"{p['name']}: {p['graph']['error']}" for p in processes if (p["graph"] or {}).get("error")
    ]
    lines += [f"cudagraph error: {e}" for e in errors[:3]]
    lines.append("")
    lines += cpu_table(processes)
    lines.append("")
    lines.append(
        "per process: CPU at start, pure-Python loop ms, import flag_gems s, then the first "
        "case's kernel (warm-up 1000), host, device and pad, ms; its autotuned configs"
    )
    first = names[0] if names else ""
    for p in processes:
        info, case = p.get("process", {}), p["cases"].get(first, {})
        tuned = case.get("tuning") or {}
        lines.append(
            f"{p['name']:7} cpu {info.get('cpu', -1):3} py {info.get('python_ms', 0):6.2f} "
            f"import {info.get('import_flag_gems_s', 0):5.1f}  kernel "
            f"{case.get('kernel_first', 0):.4f} host {med(case.get('host', [])):.4f} device "
            f"{(case.get('profile') or {}).get('device_ms') or 0:.4f} pad "
            f"{med(case.get('loop_pad', [])):.4f}  {sorted(set(tuned.values()))}"
        )
    kernels = [c for p in processes for c in p["cases"].values()]
    names_seen = {n for c in kernels for n in ((c.get("profile") or {}).get("names") or {})}
    if names_seen:
        lines.append("")
        lines.append("device work per call (profiler), first process:")
        for name, case in processes[0]["cases"].items():
            prof = case.get("profile") or {}
            lines.append(f"  {name:18} {prof.get('kernels', 0):.1f} kernels: {prof.get('names')}")
    return lines


def cpu_table(processes: list[dict[str, Any]]) -> list[str]:
    """The first case per CPU: medians over processes, and how host and kernel go together."""
    per_cpu: dict[int, list[dict[str, float]]] = defaultdict(list)
    for p in processes:
        for row in (p["cpus"] or {}).get("rows", []):
            per_cpu[row["cpu"]].append(row)
    if not per_cpu:
        return []
    case = next(p["cpus"]["case"] for p in processes if p["cpus"])
    lines = [f"{case} with the process pinned to each CPU, ms (median over processes, x max/min)"]
    lines.append(f"{'cpu':>4} {'python loop':>16} {'host':>16} {'kernel':>16}")
    pairs = []
    for cpu in sorted(per_cpu):
        rows = per_cpu[cpu]
        pairs += [(r["host"], r["kernel"]) for r in rows]
        lines.append(
            f"{cpu:4} {spread([r['python_ms'] for r in rows]):>16} "
            f"{spread([r['host'] for r in rows]):>16} {spread([r['kernel'] for r in rows]):>16}"
        )
    if len(pairs) > 2:
        hosts, kernels = zip(*pairs, strict=True)
        try:
            r = statistics.correlation(hosts, kernels)
            lines.append(f"host against kernel over all (process, cpu): r = {r:.2f}")
        except statistics.StatisticsError:
            pass
    return lines


def smi_samples(path: Path) -> list[tuple[datetime, dict[str, str]]]:
    """nvidia-smi's CSV rows (`timestamp` first), keyed by the header's field names."""
    if not path.exists():
        return []
    rows = list(csv.reader(path.read_text().splitlines()))
    if not rows:
        return []
    keys = [k.strip().split(" ")[0] for k in rows[0]]
    samples = []
    for row in rows[1:]:
        if len(row) != len(keys):
            continue
        try:
            when = datetime.strptime(row[0].strip(), "%Y/%m/%d %H:%M:%S.%f")
        except ValueError:
            continue
        samples.append((when, {k: v.strip() for k, v in zip(keys, row, strict=True)}))
    return samples


def number(text: str) -> float | None:
    try:
        return float(text.split()[0])
    except (ValueError, IndexError):
        return None


@dataclass(frozen=True)
class Clocks:
    """What nvidia-smi saw over some samples (a case's windows, a job's)."""

    samples: int
    sm_mhz: tuple[float, float, float]  # min, median, max
    busy_sm_mhz: tuple[float, float, float]  # the same over samples without the idle reason
    mem_mhz: float  # median
    reasons: dict[str, int]  # throttle reasons as nvidia-smi words them, and how often
    temperature_c: tuple[float, float]
    power_w: tuple[float, float]


def _idle(reasons: str) -> bool:
    """Whether nvidia-smi's reason bitmask holds "GPU idle" (bit 0): a clock taken while
    nothing ran says nothing of the rows."""
    try:
        return bool(int(reasons, 16) & 1)
    except ValueError:
        return False


def clocks_of(got: list[dict[str, str]]) -> Clocks:
    """The summary of nvidia-smi samples (`smi_samples`' dicts, at least one); its headers
    name `clocks.sm` as `clocks.current.sm [MHz]`, hence the suffix matches."""
    keys = got[0].keys()
    sm = next((k for k in keys if k.endswith(".sm")), "")
    mem = next((k for k in keys if k.endswith((".mem", ".memory"))), "")
    reason = next((k for k in keys if "reasons" in k), "")

    def col(key: str, rows: list[dict[str, str]] = got) -> list[float]:
        values = (number(s.get(key, "")) for s in rows)
        return [v for v in values if v is not None] or [float("nan")]

    def spread(values: list[float]) -> tuple[float, float, float]:
        return min(values), statistics.median(values), max(values)

    reasons: dict[str, int] = defaultdict(int)
    for s in got:
        reasons[s.get(reason, "?")] += 1
    temps, powers = col("temperature.gpu"), col("power.draw")
    return Clocks(
        samples=len(got),
        sm_mhz=spread(col(sm)),
        busy_sm_mhz=spread(col(sm, [s for s in got if not _idle(s.get(reason, ""))])),
        mem_mhz=statistics.median(col(mem)),
        reasons=dict(reasons),
        temperature_c=(min(temps), max(temps)),
        power_w=(min(powers), max(powers)),
    )


def clock_table(processes: list[dict[str, Any]], samples: list) -> list[str]:
    """What the GPU's clocks, throttle reasons, temperature and power did while each case ran
    (every process's window of it)."""
    if not samples:
        return []
    lines = [
        f"GPU while each case ran ({len(samples)} samples in all): SM MHz min/median/max, "
        "memory MHz, throttle reasons (count), temperature C, power W"
    ]
    names = list(dict.fromkeys(n for p in processes for n in p["cases"]))
    for name in names:
        got = []
        for p in processes:
            case = p["cases"].get(name)
            if not case or "start" not in case or "end" not in case:
                continue
            lo, hi = datetime.fromisoformat(case["start"]), datetime.fromisoformat(case["end"])
            got += [s for when, s in samples if lo <= when <= hi]
        if not got:
            lines.append(f"{name:18} no samples")
            continue
        c = clocks_of(got)
        lines.append(
            f"{name:18} n={c.samples:3} sm {c.sm_mhz[0]:.0f}/{c.sm_mhz[1]:.0f}/"
            f"{c.sm_mhz[2]:.0f} mem {c.mem_mhz:.0f} reasons {c.reasons} "
            f"temp {c.temperature_c[0]:.0f}-{c.temperature_c[1]:.0f} "
            f"power {c.power_w[0]:.0f}-{c.power_w[1]:.0f}"
        )
    return lines


# ---- FlagGems' record logs --------------------------------------------------------------


def records(path: Path, op: str) -> list[dict[str, float | str]]:
    """Each measured row of `op` in a record log, in the order written, read as the runner
    reads them, with the harness mode of its record."""
    from runner.job.layouts import parse_flaggems_records

    rows: list[dict[str, float | str]] = []
    for line in path.read_text(errors="replace").splitlines():
        start = line.find("{")
        try:
            mode = str(json.loads(line[start:]).get("mode", "kernel")) if start >= 0 else ""
        except (json.JSONDecodeError, AttributeError):
            continue
        for r in parse_flaggems_records([line], op).rows:
            rows.append(
                {
                    "row": f"{r.dtype} {r.size}->{r.output_size}",
                    "latency": r.kernel_ms,
                    "base": r.reference_ms,
                    "mode": mode,
                }
            )
    return rows


def harness_tables(out: Path, op: str) -> list[str]:
    """The record logs' tables: between processes, the first against the rest, within one
    process per mode, torch's rows between processes."""
    processes = numbered(out, PROCESS_DIR, dirs=True)
    inproc = sorted((out / "inproc").glob("result*.log"))
    if not processes and not inproc:
        return []
    between: dict[str, list[float]] = defaultdict(list)
    torch_between: dict[str, list[float]] = defaultdict(list)
    for proc in processes:
        for log in sorted(proc.glob("result*.log")):
            for r in records(log, op):
                between[str(r["row"])].append(float(r["latency"]))
                torch_between[str(r["row"])].append(float(r["base"]))
    within: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for log in inproc:
        for r in records(log, op):
            within[str(r["mode"])][str(r["row"])].append(float(r["latency"]))
    modes = list(within)
    lines = [f"harness: {len(processes)} processes; rows: {len(between)}; in one process: {modes}"]
    head = f"{'row':40} {'between':>16} {'first/rest':>10} {'torch between':>16}"
    lines.append(head + "".join(f" {'within ' + m:>18}" for m in modes))
    for row in list(dict.fromkeys([*between, *(r for m in within.values() for r in m)])):
        values = between.get(row, [])
        rest = values[1:]
        first = values[0] / statistics.median(rest) if rest else float("nan")
        lines.append(
            f"{row[:40]:40} {spread(values):>16} {first:10.2f} "
            f"{spread(torch_between.get(row, [])):>16}"
            + "".join(f" {spread(within[m].get(row, [])):>18}" for m in modes)
        )
    return lines


def main(out: Path, op: str) -> None:
    lines: list[str] = []
    processes = load_driver(out)
    if processes:
        lines += driver_tables(processes)
        lines.append("")
        lines += clock_table(processes, smi_samples(out / "smi.csv"))
        lines.append("")
    try:
        lines += harness_tables(out, op)
    except ImportError as exc:  # the runner's parser needs the runner's packages
        lines.append(f"record logs not read here ({exc})")
    times = out / "times.txt"
    if times.exists():
        lines += ["", times.read_text().strip()]
    print("\n".join(lines))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
