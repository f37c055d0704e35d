"""Where a kernel's warps wait, instruction by instruction, from ncu's source page.

    python -m tools.sass_stalls KERNEL.sass.csv [--top 25]

The CSV is `ncu -i REPORT --page source --csv --print-source sass` of a report taken with
`--set full --import-source yes` (`SOURCE=1 bash tools/gpu_profile.sh ...` writes both).
Prints the stall reasons over the whole kernel, the share of stall samples and the executed
count by opcode, and the instructions holding the most samples with their top reasons: which
load a walk waits on, whether a loop's bookkeeping or its stores take the time.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"


@dataclass
class Line:
    """One SASS instruction: its text, stall samples, executions and samples by reason."""

    source: str
    samples: int
    executed: int
    reasons: dict[str, int] = field(default_factory=dict)

    @property
    def opcode(self) -> str:
        """The mnemonic without predicate or modifiers (`@!P0 STG.E.128` -> `STG`)."""
        words = [w for w in self.source.split() if not w.startswith("@")]
        return words[0].split(".")[0] if words else "?"


def read(path: Path) -> tuple[str, list[Line]]:
    """(kernel name, its instructions) from ncu's source-page CSV: a line naming the kernel,
    then a header, then one row an instruction."""
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    start = next((i for i, row in enumerate(rows) if "Source" in row and SAMPLES in row), None)
    if start is None:
        raise ValueError(f"{path}: no source-page header (want '{SAMPLES}' and 'Source')")
    header = rows[start]
    name = next((row[1] for row in rows[:start] if row[:1] == ["Kernel Name"]), "?")
    at = {h: i for i, h in enumerate(header)}
    reasons = [h for h in header if h.startswith("stall_") and "(Not Issued)" not in h]
    lines = []
    for row in rows[start + 1 :]:
        if len(row) < len(header):
            continue
        lines.append(
            Line(
                row[at["Source"]].strip(),
                int(row[at[SAMPLES]] or 0),
                int(row[at[EXECUTED]] or 0),
                {r.removeprefix("stall_"): int(row[at[r]] or 0) for r in reasons},
            )
        )
    return name, lines


def summary(name: str, lines: list[Line], top: int = 25) -> str:
    """The report: totals, reasons, opcodes, then the `top` instructions by samples."""
    total = sum(line.samples for line in lines) or 1
    reasons: Counter[str] = Counter()
    by_op: Counter[str] = Counter()
    executed: Counter[str] = Counter()
    for line in lines:
        reasons.update(line.reasons)
        by_op[line.opcode] += line.samples
        executed[line.opcode] += line.executed
    shares = ", ".join(f"{r} {100 * n / total:.0f}%" for r, n in reasons.most_common(8))
    ops = ", ".join(f"{o} {100 * n / total:.0f}% {executed[o]}" for o, n in by_op.most_common(12))
    out = [
        f"{name}: {len(lines)} instructions, {sum(executed.values())} executed (warp level), "
        f"{total} stall samples",
        f"reasons: {shares}",
        f"opcodes (samples, executed): {ops}",
    ]
    for line in sorted(lines, key=lambda line: -line.samples)[:top]:
        why = sorted(line.reasons.items(), key=lambda kv: -kv[1])[:3]
        out.append(
            f"{100 * line.samples / total:5.1f}% {line.source[:64]:64s} "
            + " ".join(f"{r}={n}" for r, n in why if n)
        )
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("csv", type=Path, help="ncu --page source --csv --print-source sass")
    parser.add_argument("--top", type=int, default=25, help="instructions listed")
    args = parser.parse_args(argv)
    try:
        name, lines = read(args.csv)
    except (OSError, ValueError) as error:
        print(f"sass_stalls: {error}", file=sys.stderr)
        return 2
    print(summary(name, lines, args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
