"""The comparison's bars, from `ondemand run --json` results: A/A, power, cost and the gate.

    python -m tools.compare_bars aa:RUN.json... power:RUN.json untouched:RUN.json \
        [--threshold 0.10] [--cost-s 45] [--name this-repo]

`aa` runs compare a pull request that changes only a comment with its merge base: no row may
be flagged, and the median after/before over all rows must lie within ±1 % (no order bias).
`power` runs compare a pull request that slows the operator: at least 95 % of the rows whose
noise band is under the threshold must be flagged slower. `untouched` runs are of an
operator that pull request does not touch: no row may be flagged. Each row's smallest
detectable change is listed (threshold plus its noise band). Cost: a run's time to its
verdict (the job's duration; the first full job, which compiles, aside when there are more)
against `--cost-s`. Gate: the commit status each run would get
with `gate: fail` (failure exactly where a row is slower). Prints a table of bars with
yes/no last; exit 0 when every bar is met.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from report.checks import render_status
from report.verdicts import Judged, Verdict, detectable, judged_rows, noise_band
from report.views import JobView
from workflows.models import JobResult

KINDS = ("aa", "power", "untouched")


@dataclass(frozen=True)
class Run:
    kind: str
    path: Path
    result: JobResult

    def judged(self, threshold: float) -> list[Judged]:
        bench = self.result.benchmark
        return judged_rows(bench, threshold) if bench is not None else []


def load(items: Sequence[str]) -> list[Run]:
    runs = []
    for item in items:
        kind, _, name = item.partition(":")
        if kind not in KINDS or not name:
            raise SystemExit(f"expected KIND:PATH with KIND one of {', '.join(KINDS)}: {item!r}")
        path = Path(name)
        runs.append(Run(kind, path, JobResult.model_validate_json(path.read_text())))
    return runs


def status_with_gate(run: Run, threshold: float) -> str:
    """The commit status the run's job gets with `gate: fail` at `threshold`."""
    result = run.result
    now = result.finished_at or datetime.now(UTC)
    view = JobView(
        id=0, repo="r", pr_number=1, op=result.benchmark.op if result.benchmark else "op",
        backend="nvidia", sha=result.sha, status=result.status, bench=True, compare=True,
        created_at=now, started_at=result.started_at, finished_at=now, runner_name=None,
        queue_position=None, runners_online=1, job_url="", log_url="", result=result,
        reason=None, threshold=threshold, gate="fail",
    )  # fmt: skip
    return render_status(view).state


def _row(j: Judged) -> str:
    size = ",".join(map(str, j.row.size)) + "→" + ",".join(map(str, j.row.output_size or ()))
    return f"{j.row.dtype} {size}"


def report(runs: Sequence[Run], threshold: float, cost_s: float, name: str) -> tuple[str, bool]:
    lines: list[str] = []
    bars: list[tuple[str, str, bool]] = []
    by_kind = {k: [r for r in runs if r.kind == k] for k in KINDS}

    lines.append(f"# {name}: threshold ±{threshold * 100:g} %")
    for run in runs:
        judged = run.judged(threshold)
        counts = {v: sum(1 for j in judged if j.verdict is v) for v in Verdict}
        rounds = sorted(j.change.rounds for j in judged) or [0]
        bench = run.result.benchmark
        lines.append(
            f"{run.kind:9} {run.path.name}: {run.result.status.value}, "
            f"{run.result.duration_s or 0:.1f} s, {bench.compare_mode if bench else None}, "
            f"rounds {rounds[0]}–{rounds[-1]}; slower {counts[Verdict.slower]}, "
            f"faster {counts[Verdict.faster]}, same {counts[Verdict.same]}, "
            f"noisy {counts[Verdict.noisy]}; gate:fail → {status_with_gate(run, threshold)}"
        )

    aa = [j for run in by_kind["aa"] for j in run.judged(threshold)]
    if aa:
        flagged = [j for j in aa if j.verdict in (Verdict.slower, Verdict.faster)]
        bias = statistics.median(j.change.ratio for j in aa)
        bands = [b for j in aa if (b := noise_band(j.change)) is not None]
        noisy = sum(1 for j in aa if j.verdict is Verdict.noisy)
        bars.append(
            (
                "A/A: no row flagged",
                f"{len(flagged)} of {len(aa)} row verdicts flagged, {noisy} too noisy; "
                f"bands median ±{statistics.median(bands) * 100 if bands else float('nan'):.1f} %",
                not flagged,
            )
        )
        bars.append(
            ("A/A: no order bias", f"median after/before {bias:.4f}", abs(bias - 1) <= 0.01)
        )
    power = [j for run in by_kind["power"] for j in run.judged(threshold)]
    if power:
        judgeable = [j for j in power if (b := noise_band(j.change)) is not None and b < threshold]
        hit = [j for j in judgeable if j.verdict is Verdict.slower]
        share = len(hit) / len(judgeable) if judgeable else 0.0
        bars.append(
            (
                "power: slowed rows flagged",
                f"{len(hit)} of {len(judgeable)} rows with a band under ±{threshold * 100:g} % "
                f"({share:.0%}); {len(power) - len(judgeable)} rows too noisy to judge; "
                f"median change {statistics.median(j.change.ratio for j in power):.3f}",
                bool(judgeable) and share >= 0.95,
            )
        )
        missed = [j for j in judgeable if j.verdict is not Verdict.slower]
        for j in missed:
            lines.append(
                f"  missed: {_row(j)} {j.change.ratio:.3f} [{j.change.low}, {j.change.high}]"
            )
    untouched = [j for run in by_kind["untouched"] for j in run.judged(threshold)]
    if untouched:
        wrong = [j for j in untouched if j.verdict in (Verdict.slower, Verdict.faster)]
        bars.append(
            (
                "power: untouched rows unflagged",
                f"{len(wrong)} of {len(untouched)} flagged",
                not wrong,
            )
        )
    detect = {}
    for j in aa + power:
        found = detectable(j.change, threshold)
        detect.setdefault(_row(j), []).append(found)
    if detect:
        lines.append("smallest detectable slowdown per row (median over runs; – none):")
        for row, values in detect.items():
            known = [v for v in values if v is not None]
            text = f"+{statistics.median(known) * 100:.1f} %" if known else "–"
            lines.append(f"  {row}: {text} ({len(known)} of {len(values)} runs judgeable)")
    full = [r for r in runs if r.result.duration_s is not None and r.result.accuracy is not None]
    warm = full[1:] or full  # the first full job of a host compiles; the cost bar is a warm one
    if warm:
        worst = max(r.result.duration_s or 0 for r in warm)
        said = ", ".join(f"{r.path.stem} {r.result.duration_s:.1f} s" for r in full)
        bars.append(("cost: warm full job to verdict", f"{said} (≤ {cost_s:g})", worst <= cost_s))
    gate_ok = all(
        status_with_gate(r, threshold)
        == (
            "failure"
            if any(j.verdict is Verdict.slower for j in r.judged(threshold))
            else "success"
        )
        for r in runs
        if r.result.status.value == "succeeded"
    )
    bars.append(("gate: failure exactly where a row is slower", "", gate_ok))
    lines.append("")
    lines.append("| bar | measured | met |")
    lines.append("|---|---|---|")
    lines += [f"| {bar} | {what} | {'yes' if ok else 'NO'} |" for bar, what, ok in bars]
    return "\n".join(lines) + "\n", all(ok for _, _, ok in bars)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.compare_bars", description=__doc__)
    parser.add_argument("runs", nargs="+", metavar="KIND:RUN.json")
    parser.add_argument("--threshold", type=float, default=0.10)
    parser.add_argument("--cost-s", type=float, default=45.0)
    parser.add_argument("--name", default="comparison")
    parser.add_argument("--json", type=Path, help="also write the rows' verdicts here")
    args = parser.parse_args(argv)
    runs = load(args.runs)
    text, ok = report(runs, args.threshold, args.cost_s, args.name)
    sys.stdout.write(text)
    if args.json:
        rows = [
            {"kind": r.kind, "run": r.path.name, "row": _row(j), "verdict": j.verdict.value,
             **j.change.model_dump()}
            for r in runs for j in r.judged(args.threshold)
        ]  # fmt: skip
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
