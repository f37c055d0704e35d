"""Step times and time to verdict of `ondemand run --json` results, one row per file.

    python3 -m tools.verdict_times fresh=run1.json warm=run2.json [--fresh-bar 90 --warm-bar 30]

The job's time is its result's `started_at` to `finished_at` (checkout to verdict); the bars
are checked against it: the first file against the fresh bar, the rest against the warm one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workflows.models import JobResult


def row(name: str, result: JobResult) -> tuple[str, float, str]:
    assert result.started_at is not None and result.finished_at is not None
    seconds = (result.finished_at - result.started_at).total_seconds()
    acc = result.accuracy
    tests = f"{acc.passed} passed, {acc.failed} failed" if acc else "no accuracy"
    steps = " · ".join(f"{s.name} {s.duration_s or 0:.1f}s" for s in result.steps)
    return name, seconds, f"{result.status.value}; {tests}; {steps}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m tools.verdict_times", description=__doc__)
    parser.add_argument("runs", nargs="+", help="NAME=PATH of an `ondemand run --json` file")
    parser.add_argument("--fresh-bar", type=float, default=90.0)
    parser.add_argument("--warm-bar", type=float, default=30.0)
    args = parser.parse_args(argv)
    met = True
    print("| run | to verdict | bar | met | status; tests; steps |")
    print("|---|---:|---:|---|---|")
    for i, item in enumerate(args.runs):
        name, _, path = item.partition("=")
        result = JobResult.model_validate_json(Path(path).read_text())
        name, seconds, detail = row(name, result)
        bar = args.fresh_bar if i == 0 else args.warm_bar
        ok = seconds <= bar and result.status.value == "succeeded"
        met &= ok
        print(f"| {name} | {seconds:.1f} s | ≤ {bar:.0f} s | {'yes' if ok else 'NO'} | {detail} |")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
