"""Time a previous commit's kernels beside the current ones, row by row, in one process.

    python -m tools.side_by_side --before REF [--after REF] [--sizes all] [--check]

`git archive REF kernels` is unpacked into a temporary folder as the package `kernels_before`
(its `kernels.` imports and module paths rewritten), so both versions load side by side; the
current tree's `kernels` is the after (or `--after REF`, unpacked the same way). A REF that is
a folder holding a `kernels` package is copied instead (for a machine without the history).
Every row of the benchmark (`--sizes`, `--dtypes`) of the forward, the backward and the Moore
Threads backward is prepared once by the current benchmark definition, with a kernel that
calls whichever version is active: both versions read the same input tensors (where inputs
lie in memory moved one row's time by 1-2% between two preparations of the same kernels on
the H200). Each version is checked against PyTorch, then the two are timed with the
harness's timer, alternating, their order swapped every round, for `--rounds` rounds (the
median of each version's medians).
Prints a Markdown table with before, after and after/before, flagging rows more than
`--threshold` slower; `--json PATH` keeps every number. On a GPU the timer is the harness's
DeviceTimer; under Triton's interpreter a host clock (a smoke test: those are not timings).

Exit status: 0 measured (with `--check`: and no row flagged), 1 a result differed from
PyTorch's or a row was flagged under `--check`, 2 bad arguments.
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from kernels import runtime
from kernels.benchmark.definition import Case, KernelMismatch, load
from kernels.benchmark.harness import DeviceTimer, HostTimer, Timer
from kernels.benchmark.implementations import synchronizer
from kernels.benchmark.sizes import DEFAULT_DTYPES, SizeSet, parse_dtypes, shapes

# (operator, implementation): the rows the table covers by default.
ROWS: tuple[tuple[str, str], ...] = (
    ("adaptive_max_pool3d", "generic"),
    ("adaptive_max_pool3d_backward", "generic"),
    ("adaptive_max_pool3d_backward", "mthreads"),
)
_IMPORTS = re.compile(r"\bkernels(?=\.[A-Za-z_])|(?<=\bfrom )kernels\b|(?<=\bimport )kernels\b")


def unpack(ref: str, name: str, where: Path, repo: Path) -> Path:
    """`kernels` at git `ref` (or in the folder `ref`), unpacked under `where` as the package
    `name`; its path."""
    package = where / name
    if (Path(ref) / "kernels").is_dir():
        shutil.copytree(Path(ref) / "kernels", package, ignore=shutil.ignore_patterns("*.pyc"))
    else:
        archive = subprocess.run(
            ["git", "archive", "--format=tar", ref, "kernels"],
            cwd=repo, capture_output=True, check=True,
        ).stdout  # fmt: skip
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(where, filter="data")
        (where / "kernels").rename(package)
    for path in package.rglob("*.py"):
        path.write_text(_IMPORTS.sub(name, path.read_text()))
    return package


def load_package(name: str, where: Path) -> ModuleType:
    """Import the unpacked package `name` from `where`."""
    if str(where) not in sys.path:
        sys.path.insert(0, str(where))
    return importlib.import_module(name)


def implementation(package: ModuleType, op: str, impl: str) -> Callable[..., Any]:
    """`op`'s `impl` ("generic" or a vendor) in `package`, the vendor active as the harness
    makes it (`--impl mthreads` sets it for the process), so no version pays for a switch."""
    if impl != "generic":
        package.runtime.set_vendor(impl)
    fn: Callable[..., Any] = package.runtime.function(op, "active" if impl != "generic" else impl)
    return fn


@dataclass
class Measured:
    op: str
    impl: str
    dtype: str
    size: list[int]
    output_size: list[int]
    before_ms: float
    after_ms: float

    @property
    def ratio(self) -> float:
        return self.after_ms / self.before_ms


Row = tuple[str, str, Case]  # operator, implementation, case


class Switch:
    """A kernel function that calls whichever version is in use."""

    def __init__(self, fns: dict[str, Callable[..., Any]]) -> None:
        self.fns = fns
        self.active = next(iter(fns.values()))

    def use(self, label: str) -> None:
        self.active = self.fns[label]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.active(*args, **kwargs)


def measure(
    versions: dict[str, ModuleType], rows: Sequence[Row], timer: Timer, rounds: int
) -> list[Measured]:
    """Each row prepared once (both versions read the same input tensors, so where they lie
    in memory favours neither), checked for each version, then timed with the versions
    alternating and their order swapped every round."""
    out: list[Measured] = []
    for op, impl, case in rows:
        kernel = Switch({label: implementation(p, op, impl) for label, p in versions.items()})
        prepared = load(op).prepare(case, runtime.device, kernel)
        for label in versions:
            kernel.use(label)
            try:
                prepared.verify()
            except KernelMismatch as exc:
                raise SystemExit(f"{label} {op} {impl} {case.label()}: differs: {exc}") from exc
        times: dict[str, list[float]] = {label: [] for label in versions}
        for round_ in range(rounds):
            for label in list(versions)[:: 1 if round_ % 2 == 0 else -1]:
                kernel.use(label)
                times[label].append(timer(prepared.kernel))
        medians = {label: statistics.median(values) for label, values in times.items()}
        for package in versions.values():
            package.runtime.set_vendor(package.runtime.detected_vendor)
        out.append(
            Measured(
                op, impl, case.dtype, list(case.size), list(case.output_size),
                medians["before"], medians["after"],
            )
        )  # fmt: skip
        print(f"{op} {impl} {case.label()}: {out[-1].ratio:.3f}", file=sys.stderr, flush=True)
        del prepared
    return out


def table(rows: list[Measured], threshold: float) -> str:
    lines = [
        "| op | impl | dtype | size | before (ms) | after (ms) | after/before | |",
        "| --- | --- | --- | --- | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        size = ",".join(map(str, r.size)) + " → " + ",".join(map(str, r.output_size))
        flag = "**slower**" if r.ratio > 1 + threshold else ""
        lines.append(
            f"| {r.op} | {r.impl} | {r.dtype} | {size} | {r.before_ms:.6f} | {r.after_ms:.6f} "
            f"| {r.ratio:.3f} | {flag} |"
        )
    lines.append("")
    for op, impl in dict.fromkeys((r.op, r.impl) for r in rows):
        mine = [r.ratio for r in rows if (r.op, r.impl) == (op, impl)]
        geo = statistics.geometric_mean(mine)
        lines.append(f"{op} {impl}: geometric mean after/before {geo:.3f}, worst {max(mine):.3f}")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.side_by_side", description=__doc__)
    parser.add_argument(
        "--before", required=True, metavar="REF", help="git ref (or folder) of the before"
    )
    parser.add_argument("--after", metavar="REF", help="git ref of the after (default: the tree)")
    parser.add_argument("--sizes", choices=("tiny", "large", "all"), default="all")
    parser.add_argument("--dtypes", nargs="+", default=[",".join(DEFAULT_DTYPES)])
    parser.add_argument(
        "--rows", nargs="+", default=[f"{op}:{impl}" for op, impl in ROWS], metavar="OP:IMPL"
    )
    parser.add_argument("--rounds", type=int, default=3, help="timings of each version a row")
    parser.add_argument("--threshold", type=float, default=0.03, help="flag rows this slower")
    parser.add_argument("--limit", type=int, help="only the first N rows (a smoke test)")
    parser.add_argument("--check", action="store_true", help="exit 1 if a row is flagged")
    parser.add_argument("--json", type=Path, metavar="PATH")
    args = parser.parse_args(argv)
    try:
        dtypes = parse_dtypes(args.dtypes)
        wanted = [tuple(text.split(":")) for text in args.rows]
    except ValueError as exc:
        parser.error(str(exc))
    if any(len(w) != 2 for w in wanted):
        parser.error("--rows takes OP:IMPL, e.g. adaptive_max_pool3d_backward:mthreads")
    interpreted = runtime.interpreted
    size_set: SizeSet = "tiny" if interpreted and args.sizes != "large" else args.sizes
    if interpreted and args.sizes == "large":
        parser.error("--sizes large needs a GPU")
    repo = Path(__file__).resolve().parents[1]
    timer: Timer = (
        HostTimer(reps=1, synchronize=synchronizer(runtime.device))
        if interpreted
        else DeviceTimer(warmup_ms=25, rep_ms=100)
    )
    with tempfile.TemporaryDirectory(prefix="side-by-side-") as tmp:
        where = Path(tmp)
        unpack(args.before, "kernels_before", where, repo)
        versions = {"before": load_package("kernels_before", where)}
        if args.after:
            unpack(args.after, "kernels_after", where, repo)
            versions["after"] = load_package("kernels_after", where)
        else:
            versions["after"] = importlib.import_module("kernels")
        rows = [
            (op, impl, Case(dtype, size, out))
            for op, impl in wanted
            for dtype in dtypes
            for size, out in shapes(size_set)
        ][: args.limit]
        measured = measure(versions, rows, timer, args.rounds)
    text = table(measured, args.threshold)
    sys.stdout.write(f"before {args.before}, after {args.after or 'the working tree'}; "
                     f"{timer.description}\n\n{text}")  # fmt: skip
    if args.json:
        args.json.write_text(
            json.dumps({"before": args.before, "after": args.after or "tree",
                        "rows": [asdict(r) | {"ratio": r.ratio} for r in measured]}, indent=1)
        )  # fmt: skip
    slower = [r for r in measured if r.ratio > 1 + args.threshold]
    return 1 if args.check and slower else 0


if __name__ == "__main__":
    sys.exit(main())
