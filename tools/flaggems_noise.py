"""Where the noise of FlagGems' benchmark comes from: its rows measured in N processes of the
same tree (between processes), and in one process run K times over (within a process). Reads
the `--record log` files `tools/gpu_flaggems_noise.sh` leaves and prints, per row, the kernel
latency's median and spread (max / min) each way, and how far the first process sits from
the rest.

    python -m tools.flaggems_noise OUT_DIR OP
"""

from __future__ import annotations

import statistics
import sys
from collections import defaultdict
from pathlib import Path

from runner.job.layouts import read_flaggems_records


def records(path: Path, op: str) -> list[dict[str, float | str]]:
    """Each measured row of `op` in a record log, in the order written, read as the runner
    reads them."""
    return [
        {
            "row": f"{r.dtype} {r.size}->{r.output_size}",
            "latency": r.kernel_ms,
            "base": r.reference_ms,
        }
        for r in read_flaggems_records([path], op).rows
    ]


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.4f} x{max(values) / min(values):.2f}"


def main(out: Path, op: str) -> None:
    processes = sorted(out.glob("proc*"), key=lambda p: int(p.name[4:]))
    between: dict[str, list[float]] = defaultdict(list)
    torch_between: dict[str, list[float]] = defaultdict(list)
    for proc in processes:
        for log in proc.glob("result*.log"):
            for r in records(log, op):
                between[str(r["row"])].append(float(r["latency"]))
                torch_between[str(r["row"])].append(float(r["base"]))
    within: dict[str, list[float]] = defaultdict(list)
    for log in (out / "inproc").glob("result*.log"):
        for r in records(log, op):
            within[str(r["row"])].append(float(r["latency"]))
    print(f"{len(processes)} processes; rows: {len(between)}")
    print(f"{'row':44} {'between (median xspread)':>24} {'first/rest':>10} "
          f"{'within':>18} {'torch between':>18}")
    for row, values in between.items():
        rest = values[1:]
        first = values[0] / statistics.median(rest) if rest else float("nan")
        print(f"{row[:44]:44} {spread(values):>24} {first:10.2f} "
              f"{spread(within.get(row, [])):>18} {spread(torch_between[row]):>18}")
    times = out / "times.txt"
    if times.exists():
        print(times.read_text().strip())


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
