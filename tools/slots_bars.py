"""A multi-GPU host's slots measured: what busy neighbours do to a verdict, and what N slots
give in jobs per hour (docs/h200/slots.md).

    python -m tools.slots_bars drive --out OUT --slots N [--steps "alone busy throughput"]
        [--sources "self flaggems"] [--aa 3] [--tarball FG.tar.xz --wheelhouse DIR]
    python -m tools.slots_bars drive --dry-run --out OUT    # CPU, 2 slots, this repository
    python -m tools.slots_bars OUT [OUT...] [--threshold 0.10]

Each job is the product's own path, `ondemand run OP:BACKEND --ref PR --base main --json`,
started the way a runner's slot starts its steps: the workflow's visible-devices variable
naming the slot's device, caches of the slot's own (XDG_CACHE_HOME), and from a thread pinned
to the slot's cores (the daemon's partition and pinning, `runner.daemon.cores`: every process
the job starts inherits them). The pull requests are made as `tools.flaggems_bars` makes
them: comment-only edits (A/A) of an operator's file, on this repository and on a FlagGems
checkout. The steps:

- alone: slot 0 runs the A/A pull requests (benchmark only), every other slot idle: the
  baseline bands.
- busy: slot 0 runs the same A/A pull requests again while every other slot runs neighbour
  jobs in a loop: full jobs (accuracy tests, compiles afresh, benchmarks) of other operators.
- throughput: the neighbour mix on slot 0 alone, then a copy of it on every slot at once.

Every job leaves OUT/jobs/NAME.json (its JobResult) and NAME.meta.json (step, slot, device,
cores, wall time). The reader prints each row's A/A band alone and with neighbours, the
rows flagged and too noisy in each, and jobs per hour with N slots and with one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from runner.daemon.cores import CorePlan, CoresPerSlot, host_cores, partition, pin_thread, span
from tools.flaggems_bars import (
    MAIN_OP,
    Job,
    Run,
    init_checkout,
    load_runs,
    make_branch,
    op_path,
    row_name,
    write_workflows,
)

STEPS = ("alone", "busy", "throughput")
SELF_NEIGHBOURS = ("adaptive_max_pool3d",)  # this repository's other operator
FG_OP, FG_NEIGHBOURS = MAIN_OP, ("exp", "vdot")
Runner = Callable[..., subprocess.CompletedProcess[bytes]]


def self_path(op: str) -> str:
    return f"kernels/ops/{op}/__init__.py"


@dataclass(frozen=True)
class Source:
    """A repository the jobs run on: its A/A operator, its neighbours' operators, where an
    operator's file is, and what its jobs add to `ondemand run`."""

    name: str  # self, flaggems
    repo: Path
    op: str
    neighbours: tuple[str, ...]
    path: Callable[[str], str]
    extra: tuple[str, ...] = ()


@dataclass
class Slots:
    """The host's slots as a runner with `--devices 0..N-1` has them; each job runs on one."""

    out: Path
    work: Path
    plan: CorePlan
    devices: list[str]
    var: str  # the workflow's visible-devices variable
    run: Runner = subprocess.run
    lock: threading.Lock = field(default_factory=threading.Lock)

    def job(self, slot: int, job: Job, step: str) -> dict[str, Any]:
        """Run `job` on `slot` from a thread pinned to the slot's cores; its meta record."""
        box: dict[str, Any] = {}
        thread = threading.Thread(target=lambda: box.update(self._job(slot, job, step)))
        thread.start()
        thread.join()
        return box

    def _job(self, slot: int, job: Job, step: str) -> dict[str, Any]:
        cores = self.plan.cores(slot)
        pin_thread(cores)
        jobs = self.out / "jobs"
        jobs.mkdir(parents=True, exist_ok=True)
        result = jobs / f"{job.name}.json"
        result.unlink(missing_ok=True)
        env = {**os.environ, self.var: self.devices[slot]}
        env["XDG_CACHE_HOME"] = str(self.work / f"cache-slot-{slot}")
        started, start = datetime.now(), time.monotonic()
        done = self.run(job.argv(result), capture_output=True, env=env, check=False)
        wall = time.monotonic() - start
        (jobs / f"{job.name}.md").write_bytes(done.stdout or b"")
        tail = (done.stderr or b"").decode(errors="replace").splitlines()[-80:]
        (jobs / f"{job.name}.stderr.txt").write_text("\n".join(tail) + "\n")
        meta = {
            "name": job.name, "op": job.op, "kind": job.kind, "ref": job.ref,
            "source": job.source, "full": job.full, "step": step, "slot": slot,
            "device": self.devices[slot], "cores": span(cores) or None,
            "affinity": span(sorted(os.sched_getaffinity(0))), "exit": done.returncode,
            "wall_s": round(wall, 1), "result": result.name if result.exists() else None,
            "started": started.isoformat(), "ended": datetime.now().isoformat(),
        }  # fmt: skip
        (jobs / f"{job.name}.meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        with self.lock:
            print(f"{step} slot {slot}: {job.name}: exit {done.returncode} in {wall:.1f} s")
        return meta

    def devices_seen(self, module: str | None, plugin: str | None) -> list[str]:
        """What each slot's process sees of the devices (`torch.<module>.device_count()`
        after importing `plugin`, with the slot's variable and cores): one each, its own."""
        lines = []
        for slot in range(len(self.devices)):
            code = (f"import torch{', ' + plugin if plugin else ''}; m = torch.{module}; "
                    "n = m.device_count(); print(n, 'device(s)', m.get_device_name(0) if n else '')"
                    if module else "print('no device module (cpu)')")  # fmt: skip
            box: dict[str, str] = {}

            def ask(slot: int = slot, code: str = code, box: dict[str, str] = box) -> None:
                pin_thread(self.plan.cores(slot))
                env = {**os.environ, self.var: self.devices[slot]}
                done = self.run([sys.executable, "-c", code], capture_output=True, env=env)
                said = (done.stdout or done.stderr or b"").decode().strip().splitlines()
                box["seen"] = said[-1][:200] if said else f"nothing (exit {done.returncode})"

            thread = threading.Thread(target=ask)
            thread.start()
            thread.join()
            lines.append(f"slot {slot} ({self.var}={self.devices[slot]}) sees: {box['seen']}")
        return lines

    def loop(self, slot: int, jobs: Sequence[Job], stop: threading.Event, step: str) -> None:
        """Run `jobs` round after round on `slot` until `stop` (each round's names numbered)."""
        rounds = 0
        while not stop.is_set():
            rounds += 1
            for job in jobs:
                if stop.is_set():
                    return
                self.job(slot, replace(job, name=f"{job.name}-s{slot}r{rounds}"), step)


def make_sources(args: argparse.Namespace, work: Path) -> list[Source]:
    """The checkouts with their pull requests: A/A comment edits of the A/A operator and one
    of each neighbour operator (its full jobs compile afresh)."""
    sources = []
    for name in args.sources.split():
        repo = work / name
        if name == "self":
            init_checkout(repo, files=Path(args.self_repo))
            source = Source(name, repo, args.self_op, tuple(args.self_neighbours.split()),
                            self_path, ("--no-compile-cache",))  # fmt: skip
        elif name == "flaggems":
            init_checkout(repo, tarball=args.tarball)
            extra = ("--wheelhouse", str(args.wheelhouse), "--no-compile-cache")
            source = Source(name, repo, args.fg_op, tuple(args.fg_neighbours.split()), op_path,
                            extra)  # fmt: skip
        else:
            raise SystemExit(f"unknown source {name!r}: self or flaggems")
        for i in range(1, args.aa + 1):
            make_branch(repo, f"{source.op}-aa{i}", source.path(source.op), "comment", source.op, i)
        for op in source.neighbours:
            make_branch(repo, f"{op}-n", source.path(op), "comment", op, 1)
        sources.append(source)
    return sources


def drive(args: argparse.Namespace, run: Runner = subprocess.run) -> int:
    """Make the pull requests, then run the chosen steps in order (`run` starts each job's
    command: a fake in tests)."""
    if args.dry_run:
        args.backend, args.sources, args.slots = "cpu", "self", 2
    work: Path = args.work
    work.mkdir(parents=True, exist_ok=True)
    full, bench = work / "wf-full", work / "wf-bench"
    write_workflows(Path(args.workflows_src), full, bench, "auto")
    from workflows.spec import load_workflows

    workflow = load_workflows(full)[args.backend]
    var = workflow.visible_devices_var or "CUDA_VISIBLE_DEVICES"
    plan = partition(host_cores(), args.slots, args.cores_per_slot)
    slots = Slots(args.out, work, plan, [str(i) for i in range(args.slots)], var, run)
    for line in plan.describe(slots.devices):
        print(line)
    if plan.unpinned:
        print(f"slots not pinned: {plan.unpinned}")
    for line in slots.devices_seen(workflow.device.module, workflow.device.plugin):
        print(line)
    sources = make_sources(args, work)

    def aa(source: Source, step: str) -> list[Job]:
        return [Job(f"{source.name}-{source.op}-aa{i}-{step}", source.op, "aa",
                    f"{source.op}-aa{i}", source.repo, bench, False, source.name,
                    source.extra, args.backend) for i in range(1, args.aa + 1)]  # fmt: skip

    def neighbours(source: Source, tag: str) -> list[Job]:
        return [Job(f"{source.name}-{op}-{tag}", op, "neighbour", f"{op}-n", source.repo, full,
                    True, source.name, source.extra, args.backend)
                for op in source.neighbours]  # fmt: skip

    for step in args.steps.split():
        print(f"== step {step}")
        for source in sources:
            if step == "alone":
                for job in aa(source, "alone"):
                    slots.job(0, job, "alone")
            elif step == "busy":
                busy(slots, aa(source, "busy"), neighbours(source, "busy"))
            elif step == "throughput":
                throughput(slots, neighbours(source, "tp1"), neighbours(source, "tpn"))
            else:
                raise SystemExit(f"unknown step {step!r}: {', '.join(STEPS)}")
    return 0


def busy(slots: Slots, aa: Sequence[Job], mix: Sequence[Job]) -> None:
    """Slot 0's A/A jobs while every other slot runs the neighbour mix until they end."""
    stop = threading.Event()
    others = [
        threading.Thread(target=slots.loop, args=(slot, mix, stop, "busy"))
        for slot in range(1, len(slots.devices))
    ]
    for thread in others:
        thread.start()
    try:
        for job in aa:
            slots.job(0, job, "busy")
    finally:
        stop.set()
        for thread in others:
            thread.join()


def throughput(slots: Slots, one: Sequence[Job], each: Sequence[Job]) -> None:
    """The neighbour mix on slot 0 alone, then a copy of it on every slot at once."""
    for job in one:
        slots.job(0, job, "throughput-1")
    step = f"throughput-{len(slots.devices)}"

    def copy(slot: int) -> None:
        for job in each:
            slots.job(slot, replace(job, name=f"{job.name}-s{slot}"), step)

    threads = [threading.Thread(target=copy, args=(s,)) for s in range(len(slots.devices))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


# ---------------------------------------------------------------------------------------------
# The reader.


def jobs_per_hour(runs: Sequence[Run], step: str) -> float | None:
    """Jobs that ended with a result in `step`, per hour of its wall time (its first start to
    its last end)."""
    done = [r for r in runs if r.meta.get("step") == step and r.result is not None]
    if not done:
        return None
    start = min(datetime.fromisoformat(r.meta["started"]) for r in done)
    end = max(datetime.fromisoformat(r.meta["ended"]) for r in done)
    seconds = max((end - start).total_seconds(), 1e-6)
    return len(done) * 3600 / seconds


def row_table(runs: Sequence[Run], threshold: float) -> tuple[list[str], dict[str, int]]:
    """Per row of each A/A operator: the band's median alone and with neighbours, and the
    verdicts flagged or too noisy in each; and the counts over all rows."""
    from report.verdicts import Verdict

    flagged_kinds = (Verdict.slower, Verdict.faster)
    rows: dict[tuple[str, str], dict[str, list[Any]]] = {}
    for run in runs:
        step = run.meta.get("step")
        if run.meta.get("kind") != "aa" or step not in ("alone", "busy"):
            continue
        key = f"{run.meta['source']} {run.meta['op']}"
        for judged in run.judged(threshold):
            rows.setdefault((key, row_name(judged)), {}).setdefault(step, []).append(judged)
    counts = {f"{s} {what}": 0 for s in ("alone", "busy") for what in ("rows", "flagged", "noisy")}
    lines = ["row: A/A band alone · with neighbours (×) · flagged alone/busy · too noisy"]
    for (op, row), steps in sorted(rows.items()):
        cells, bands = [], {}
        for step in ("alone", "busy"):
            judged = steps.get(step, [])
            found = [j.band for j in judged if j.band is not None]
            bands[step] = statistics.median(found) if found else None
            counts[f"{step} rows"] += len(judged)
            counts[f"{step} flagged"] += sum(j.verdict in flagged_kinds for j in judged)
            counts[f"{step} noisy"] += sum(j.verdict is Verdict.noisy for j in judged)
        alone, with_ = bands["alone"], bands["busy"]
        cells.append(f"±{alone * 100:.1f} %" if alone is not None else "±?")
        ratio = f" (×{with_ / alone:.1f})" if alone and with_ is not None else ""
        cells.append((f"±{with_ * 100:.1f} %" if with_ is not None else "±?") + ratio)
        flags = [sum(j.verdict in flagged_kinds for j in steps.get(s, [])) for s in STEPS[:2]]
        noisy = [sum(j.verdict is Verdict.noisy for j in steps.get(s, [])) for s in STEPS[:2]]
        cells.append(f"{flags[0]}/{flags[1]}" + (" FLAGGED" if any(flags) else ""))
        cells.append(f"{noisy[0]}/{noisy[1]}" + (" NOISY" if any(noisy) else ""))
        lines.append(f"  {op} {row}: " + " · ".join(cells))
    return lines, counts


def report(runs: Sequence[Run], threshold: float) -> str:
    lines, counts = row_table(runs, threshold)
    for step in ("alone", "busy"):
        lines.append(
            f"{'with neighbours' if step == 'busy' else 'alone'}: {counts[f'{step} flagged']} of "
            f"{counts[f'{step} rows']} row verdicts flagged, {counts[f'{step} noisy']} too noisy"
        )
    one = jobs_per_hour(runs, "throughput-1")
    many_steps = sorted({str(r.meta.get("step")) for r in runs} - {"throughput-1"})
    for step in (s for s in many_steps if s.startswith("throughput-")):
        many = jobs_per_hour(runs, step)
        slots = step.split("-", 1)[1]
        gain = f" (×{many / one:.2f})" if one and many else ""
        lines.append(f"throughput: {_rate(many)} jobs/h on {slots} slots, {_rate(one)} on one"
                     f"{gain}")  # fmt: skip
    failed = [r.name for r in runs if r.result is None]
    if failed:
        lines.append(f"no result: {', '.join(sorted(failed))}")
    return "\n".join(lines)


def _rate(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"


def drive_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m tools.slots_bars drive")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--work", type=Path, default=Path("/tmp/slots-bars"))
    p.add_argument("--slots", type=int, default=8)
    p.add_argument("--cores-per-slot", type=CoresPerSlot(), default="auto")
    p.add_argument("--steps", default=" ".join(STEPS))
    p.add_argument("--sources", default="self flaggems")
    p.add_argument("--aa", type=int, default=3, help="A/A pull requests per source")
    p.add_argument("--backend", default="nvidia")
    p.add_argument("--workflows-src", default="workflows")
    p.add_argument("--self-repo", default=".")
    p.add_argument("--self-op", default=MAIN_OP)
    p.add_argument("--self-neighbours", default=" ".join(SELF_NEIGHBOURS))
    p.add_argument("--tarball", type=Path, default=Path(".device/flaggems.tar.xz"))
    p.add_argument("--wheelhouse", type=Path, default=Path(".device/wheelhouse").resolve())
    p.add_argument("--fg-op", default=FG_OP)
    p.add_argument("--fg-neighbours", default=" ".join(FG_NEIGHBOURS))
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="on CPU: the cpu backend, two slots, this repository only (the path, not timings)",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["drive"]:
        return drive(drive_parser().parse_args(argv[1:]))
    p = argparse.ArgumentParser(prog="python -m tools.slots_bars")
    p.add_argument("out", type=Path, nargs="+")
    p.add_argument("--threshold", type=float, default=0.10)
    args = p.parse_args(argv)
    print(report(load_runs(args.out), args.threshold))
    return 0


if __name__ == "__main__":
    sys.exit(main())
