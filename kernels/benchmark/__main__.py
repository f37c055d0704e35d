"""`python -m kernels.benchmark --op OP`: verify, time and tabulate one operator.

With `--baseline TREE` (a checkout of the merge base), that tree's kernels are loaded beside
ours and every row's reference, merge-base kernel and our kernel are timed in alternating
rounds until each row's change is known or `--budget-s` is spent (`rounds.py`).

Exit status: 0 measured; 1 a kernel result differed from PyTorch's or a case raised (no JSON
is written then); 2 bad arguments; 3 the baseline's kernels cannot be loaded here or lack the
operator (time the two trees in separate processes instead).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

# Importing this package ran kernels/__init__.py first, which sets up the Triton interpreter
# on a machine without a GPU before anything loads triton.
from kernels.benchmark import baseline, implementations, rounds
from kernels.benchmark.bandwidth import copy_bandwidth_gbps
from kernels.benchmark.definition import KNOWN_OPS, Case, KernelMismatch, load
from kernels.benchmark.harness import (
    PRECISION,
    BenchmarkError,
    DeviceTimer,
    HostTimer,
    Timer,
    run_cases,
)
from kernels.benchmark.implementations import IMPLS, Target
from kernels.benchmark.report import NOT_PERFORMANCE, Environment, Report
from kernels.benchmark.sizes import SizeSet, parse_dtypes, shapes


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m kernels.benchmark",
        description="Time our kernel against PyTorch's own operator on the same inputs, "
        "after checking that both give the same result.",
    )
    parser.add_argument("--op", required=True, choices=KNOWN_OPS, help="operator to benchmark")
    parser.add_argument(
        "--dtypes",
        nargs="+",
        default=["float16,float32,bfloat16"],
        metavar="DTYPE",
        help="float16, float32, bfloat16, float64 (comma- or space-separated; fp16/bf16/fp32 "
        "work too). Default: float16 float32 bfloat16",
    )
    parser.add_argument(
        "--sizes",
        choices=("tiny", "large", "all"),
        default="tiny",
        help="tiny: the seed's four shapes; large: memory-bound shapes (GPU only); all: both",
    )
    parser.add_argument(
        "--impl",
        choices=IMPLS,
        default="active",
        help="active: what kernels.runtime dispatches to on this device; generic, or a vendor "
        "with overrides (mthreads): force that implementation (default: active)",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the JSON result here")
    parser.add_argument("--markdown", type=Path, metavar="PATH", help="write the table here")
    parser.add_argument("--rep-ms", type=_positive_int, default=100, help="GPU: ms of timed runs")
    parser.add_argument("--warmup-ms", type=_positive_int, default=25, help="GPU: ms of warm-up")
    parser.add_argument(
        "--precision",
        type=_fraction,
        default=PRECISION,
        help="GPU: stop timing a side before --rep-ms once its median's 95%% interval spans "
        "at most this fraction of it (0: always all of --rep-ms; default: %(default)s)",
    )
    parser.add_argument(
        "--host-reps", type=_positive_int, default=3, help="interpreter: calls timed per case"
    )
    parser.add_argument(
        "--host-calls",
        type=int,
        default=1000,
        help="GPU: back-to-back calls, synchronized once, for each side's host time per call "
        "(0: not measured; never under the interpreter)",
    )
    parser.add_argument(
        "--reach",
        action="store_true",
        help="also time each row's reach: the fastest of twenty one-launch movers of its "
        "minimum bytes, with the same timer (twenty more timings a row: on a GPU up to 2 s "
        "a row at the default budget)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="TREE",
        help="a checkout (e.g. the merge base) whose kernels are timed beside ours, in rounds",
    )
    parser.add_argument(
        "--budget-s",
        type=float,
        default=rounds.Plan.budget_s,
        help="with --baseline: seconds the rounds may take (default: %(default)s)",
    )
    parser.add_argument(
        "--target",
        type=_fraction,
        default=rounds.TARGET,
        help="with --baseline: a row is done once its change is known within this fraction "
        "either side (default: %(default)s)",
    )
    parser.add_argument(
        "--round-ms",
        type=_positive_int,
        default=10,
        help="with --baseline, on a GPU: ms of timed runs of one side in one round",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    return parser


def _fraction(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 0 and below 1: {value}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {value}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)

    try:
        dtypes = parse_dtypes(args.dtypes)
    except ValueError as exc:
        parser.error(str(exc))
    try:
        kernel_fn, implementation = implementations.select(args.op, args.impl)
    except ValueError as exc:
        parser.error(str(exc))
    target = implementations.current_target()  # after select: it may force a vendor
    try:
        size_set = _size_set_for(target, args.sizes)
    except ValueError as exc:
        parser.error(str(exc))

    if args.baseline is not None and args.reach:
        parser.error("--reach and --baseline: one at a time")

    bench = load(args.op)
    try:
        implementations.check_reference_is_pytorch()
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    timer = _timer_for(target, args)
    copy_gbps = copy_bandwidth_gbps(target.device, timer) if target.performance else None
    cases = [Case(dtype, size, out) for dtype in dtypes for size, out in shapes(size_set)]
    host_calls = max(0, args.host_calls) if target.performance else 0
    synchronize = implementations.synchronizer(target.device)

    show = not args.no_progress and sys.stderr.isatty()
    scratch = tempfile.TemporaryDirectory(prefix="kernels-baseline-")
    try:
        before_fn = None
        if args.baseline is not None:
            package = baseline.load(args.baseline, Path(scratch.name))
            before_fn = baseline.function(package, args.op, args.impl)
        with _progress(len(cases), show) as advance:
            if before_fn is None:
                rows = run_cases(
                    bench,
                    cases,
                    kernel_fn,
                    target.device,
                    timer,
                    copy_gbps,
                    advance,
                    host_calls=host_calls,
                    synchronize=synchronize,
                    reach=args.reach,
                )
            else:
                plan = rounds.Plan(budget_s=args.budget_s, target=args.target)
                rows = rounds.compare_cases(
                    bench,
                    cases,
                    kernel_fn,
                    before_fn,
                    target.device,
                    _round_timer_for(target, args),
                    copy_gbps,
                    plan,
                    advance,
                    host_calls=host_calls,
                    synchronize=synchronize,
                )
    except baseline.BaselineError as exc:
        print(f"error: baseline: {exc}", file=sys.stderr)
        return 3
    except BenchmarkError as exc:
        if exc.__cause__ is not None and not isinstance(exc.__cause__, KernelMismatch):
            traceback.print_exception(exc.__cause__, file=sys.stderr)
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        scratch.cleanup()

    env = Environment(
        impl=args.impl,
        implementation=implementation,
        device=target.device_name,
        vendor=target.vendor,
        torch=target.torch_version,
        triton=target.triton_version,
        performance=target.performance,
        timing=timer.description,
        copy_bandwidth_gbps=copy_gbps,
    )
    mode = "in_process" if args.baseline is not None else None
    report = Report(op=args.op, env=env, rows=rows, compare_mode=mode)
    markdown = report.to_markdown()
    sys.stdout.write(markdown)
    if args.markdown:
        _write(args.markdown, markdown)
    if args.json:
        _write(args.json, json.dumps(report.to_json(), indent=2) + "\n")
    return 0


def _size_set_for(target: Target, asked: SizeSet) -> SizeSet:
    """The sizes that run here: the interpreter refuses `large` and clips `all` to `tiny`."""
    if target.performance:
        return asked
    if asked == "large":
        raise ValueError(
            "--sizes large needs a GPU: under the Triton interpreter only the tiny sizes run "
            "(use --sizes tiny)"
        )
    if asked == "all":
        print("note: Triton interpreter: --sizes all runs the tiny sizes only", file=sys.stderr)
    print(f"note: {NOT_PERFORMANCE}", file=sys.stderr)
    return "tiny"


def _timer_for(target: Target, args: argparse.Namespace) -> Timer:
    if target.performance:
        return DeviceTimer(warmup_ms=args.warmup_ms, rep_ms=args.rep_ms, precision=args.precision)
    return HostTimer(reps=args.host_reps, synchronize=implementations.synchronizer(target.device))


def _round_timer_for(target: Target, args: argparse.Namespace) -> Timer:
    """One side's timing in one round: short, since the rounds repeat it."""
    if target.performance:
        return DeviceTimer(warmup_ms=1, rep_ms=args.round_ms, precision=0)
    return HostTimer(reps=1, synchronize=implementations.synchronizer(target.device))


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


@contextmanager
def _progress(total: int, show: bool) -> Iterator[Callable[[Case], None]]:
    """Yields a per-case callback: a rich progress bar on a terminal, nothing otherwise."""
    if not show:
        yield lambda case: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("benchmark", total=total)
        started = False

        def advance(case: Case) -> None:
            nonlocal started
            if started:
                progress.advance(task)
            started = True
            progress.update(task, description=case.label())

        yield advance
        progress.update(task, completed=total)


if __name__ == "__main__":
    sys.exit(main())
