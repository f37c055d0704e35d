"""Where a comparison in workers' noise lies, from what the bars' device calls bring back
(tools/gpu_flaggems_bars.sh: `jobs.tgz` and `runs.tgz`, unpacked anywhere under DIRS):

- **device, within a process**: each side's per-round device times of a row (the JobResult's
  `kernel_samples_ms` / `before_kernel_samples_ms`, every round), max/min;
- **device, between processes**: an A/A job's after/before median ratio of a row (the two
  workers are two processes of the same code);
- **host, within a process and between processes**: the same from the timer's readings in the
  workers' answer files (`bench-rounds-{after,base}/round-N.json`, rounds 2 on: the first
  round compiles and tunes);
- **host-bound**: each row's host time per call over its device time per call;
- **the GPU's clocks** while each job ran: the call's `smi.csv` (nvidia-smi, every 200 ms)
  within the job's window (`NAME.meta.json`'s `started`/`ended`).

    python -m tools.flaggems_rounds DIR [DIR ...] [--clocks-only]

One line per job (the medians over its rows, and the worst row), then, per operator, the
A/A jobs together. A job's runs are matched to its JobResult by commit (`job.log`'s first
line names it)."""

from __future__ import annotations

import argparse
import json
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from tools.flaggems_noise import Clocks, clocks_of, smi_samples

JOB_LINE = re.compile(r"job \d+: (\w+) on \w+ at ([0-9a-f]{40})")


@dataclass(frozen=True)
class Spread:
    """A job's rows' readings, in row order: per row, each side's device samples over rounds,
    and each side's host and device readings per answered round (rounds 2 on)."""

    name: str
    device_after: list[list[float]]
    device_before: list[list[float]]
    host_after: list[list[float]]  # per row, per round
    host_before: list[list[float]]
    timer_device_after: list[list[float]]


def _ratio(values: Sequence[float]) -> float:
    return max(values) / min(values) if values and min(values) > 0 else float("nan")


def _answers(side: Path) -> list[dict]:
    """The answer files of one worker, rounds 2 on, in round order."""
    found = []
    for path in side.glob("round-*.json"):
        answer = json.loads(path.read_text())
        if answer.get("round", 0) >= 2:
            found.append(answer)
    return sorted(found, key=lambda a: a["round"])


def _kernel_readings(answers: list[dict], key: str, rows: int) -> list[list[float]]:
    """Per row, the kernel's reading (`key`) of each round whose count is two a row."""
    per_row: list[list[float]] = [[] for _ in range(rows)]
    for answer in answers:
        timings = answer.get("timings", [])
        if len(timings) != 2 * rows:
            continue
        for i in range(rows):
            per_row[i].append(float(timings[2 * i + 1][key]))
    return per_row


def _kept(per_row: list[list[float]], keep: list[int]) -> list[list[float]]:
    return [per_row[i] for i in keep]


def load(dirs: Sequence[Path]) -> list[Spread]:
    """Every job under `dirs` with a JobResult of a comparison, with its runs' answers where
    they came back (a later directory's job of the same name replaces an earlier one's)."""
    runs: dict[str, Path] = {}
    results: dict[str, tuple[str, dict]] = {}
    for top in dirs:
        for log in sorted(top.rglob("job.log")):
            match = JOB_LINE.search(log.read_text(errors="replace")[:2000])
            if match:
                runs[match.group(2)] = log.parent
        for path in sorted(top.rglob("*.json")):
            if path.name.endswith(".meta.json") or path.name.startswith("round-"):
                continue
            try:
                data = json.loads(path.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if isinstance(data, dict) and data.get("sha") and data.get("benchmark"):
                results[path.stem] = (data["sha"], data["benchmark"])
    spreads = []
    for name, (sha, bench) in sorted(results.items()):
        rows = [r for r in bench.get("rows", []) if r.get("before_kernel_samples_ms")]
        if not rows:
            continue
        run = runs.get(sha)
        artifacts = run / "job" / "artifacts" if run else None
        after = _answers(artifacts / "bench-rounds-after") if artifacts else []
        before = _answers(artifacts / "bench-rounds-base") if artifacts else []
        count = len(bench["rows"])
        keep = [i for i, r in enumerate(bench["rows"]) if r.get("before_kernel_samples_ms")]
        spreads.append(
            Spread(
                name=name,
                device_after=[r["kernel_samples_ms"] for r in rows],
                device_before=[r["before_kernel_samples_ms"] for r in rows],
                host_after=_kept(_kernel_readings(after, "host_ms", count), keep),
                host_before=_kept(_kernel_readings(before, "host_ms", count), keep),
                timer_device_after=_kept(_kernel_readings(after, "device_ms", count), keep),
            )
        )
    return spreads


@dataclass(frozen=True)
class Figures:
    """A job's medians over its rows (and worst rows) of each part of the noise."""

    rows: int
    device_within: float | None  # max/min over rounds, one side (None: one round)
    device_between: float  # |after/before - 1|, medians of both sides
    host_within: float | None
    host_between: float | None
    host_over_device: float | None
    worst_device_between: float
    worst_host_between: float | None


def figures(spread: Spread) -> Figures:
    within = [_ratio(s) for s in (*spread.device_after, *spread.device_before) if len(s) > 1]
    between = [
        abs(statistics.median(a) / statistics.median(b) - 1)
        for a, b in zip(spread.device_after, spread.device_before, strict=True)
    ]
    hosts = [(a, b) for a, b in zip(spread.host_after, spread.host_before, strict=True) if a and b]
    host_within = [_ratio(s) for pair in hosts for s in pair if len(s) > 1]
    host_between = [abs(statistics.median(a) / statistics.median(b) - 1) for a, b in hosts]
    bound = [
        statistics.median(h) / statistics.median(d)
        for h, d in zip(spread.host_after, spread.timer_device_after, strict=True)
        if h and d and statistics.median(d) > 0
    ]
    med = lambda xs: statistics.median(xs) if xs else None  # noqa: E731
    return Figures(
        rows=len(between),
        device_within=med(within),  # None: one round, nothing to spread
        device_between=statistics.median(between),
        host_within=med(host_within),
        host_between=med(host_between),
        host_over_device=med(bound),
        worst_device_between=max(between),
        worst_host_between=max(host_between) if host_between else None,
    )


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value * 100:.1f} %"


def _x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def report(spreads: Sequence[Spread]) -> str:
    lines = [
        "| job | rows | device within a process (max/min over rounds) | device A↔B "
        "(median · worst) | host within a process | host A↔B (median · worst) | host/device |",
        "|---|---|---|---|---|---|---|",
    ]
    for spread in spreads:
        f = figures(spread)
        lines.append(
            f"| {spread.name} | {f.rows} | {_x(f.device_within)} | {_pct(f.device_between)} · "
            f"{_pct(f.worst_device_between)} | {_x(f.host_within)} | {_pct(f.host_between)} · "
            f"{_pct(f.worst_host_between)} | {_x(f.host_over_device)} |"
        )
    return "\n".join(lines)


def job_clocks(dirs: Sequence[Path]) -> list[tuple[str, Clocks]]:
    """Each job's window of the `smi.csv` beside it (the same call's directory), by name."""
    found: dict[str, Clocks] = {}
    for top in dirs:
        for log in sorted(top.rglob("smi.csv")):
            samples = smi_samples(log)
            for meta_path in sorted(log.parent.rglob("*.meta.json")):
                meta = json.loads(meta_path.read_text())
                if "started" not in meta or "ended" not in meta:
                    continue
                lo = datetime.fromisoformat(meta["started"])
                hi = datetime.fromisoformat(meta["ended"])
                got = [s for when, s in samples if lo <= when <= hi]
                if got:
                    found[meta["name"]] = clocks_of(got)
    return sorted(found.items())


def clocks_report(clocks: Sequence[tuple[str, Clocks]]) -> str:
    lines = [
        "| job | samples | SM MHz busy: min / median / max | SM MHz all | memory MHz "
        "| throttle reasons (samples; 0x1 idle) | temperature °C | power W |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, c in clocks:
        reasons = ", ".join(f"{word} ×{n}" for word, n in sorted(c.reasons.items()))
        lines.append(
            f"| {name} | {c.samples} | {c.busy_sm_mhz[0]:.0f} / {c.busy_sm_mhz[1]:.0f} / "
            f"{c.busy_sm_mhz[2]:.0f} | {c.sm_mhz[0]:.0f}–{c.sm_mhz[2]:.0f} | {c.mem_mhz:.0f} | "
            f"{reasons} | {c.temperature_c[0]:.0f}–{c.temperature_c[1]:.0f} | "
            f"{c.power_w[0]:.0f}–{c.power_w[1]:.0f} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--clocks-only", action="store_true", help="only the clocks' table")
    args = parser.parse_args(argv)
    clocks = job_clocks(args.dirs)
    if args.clocks_only:
        print(clocks_report(clocks) if clocks else "no job with clocks found")
        return 0 if clocks else 1
    spreads = load(args.dirs)
    if not spreads:
        print("no comparison job found under", " ".join(map(str, args.dirs)))
        return 1
    print(report(spreads))
    if clocks:
        print()
        print(clocks_report(clocks))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
