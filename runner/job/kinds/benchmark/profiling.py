"""`/test profile`: after the comparison (whose verdict stands alone), the rows that changed
most (by the comparison's ratio, the top three; where none changed, the three slowest) are
timed again under the workflow's profiler (`device.profiler`) on the pull request and on the
merge base: the step's own command in each tree, in a process like the step's, through the
profiling shim (`runner/plugins/bench_profile.py`). Each row's traces are kept in
`{artifacts}/profile/` (uploaded by the job runner: `trace_files`) and summarised (`traces`) into
`JobResult.profile`. A profile that cannot be made says why and changes nothing else."""

from __future__ import annotations

import math
import shutil
from pathlib import Path

from runner.job.kinds.benchmark import traces
from runner.job.kinds.context import StepContext, Tree, base_side
from runner.plugins import PLUGINS
from workflows.models import (
    MAX_PROFILE_KERNELS,
    MAX_PROFILE_ROWS,
    BenchmarkResult,
    BenchmarkRow,
    KernelTime,
    ProfiledRow,
    ProfileResult,
)
from workflows.spec import Step

SHIM = "bench_profile"
PROFILE_DIR = "profile"
SIDES = ("before", "after")


def trace_name(side: str, row: int) -> str:
    """The name a trace is uploaded under (a job's artifact): `profile-after-row-3.json`."""
    return f"{PROFILE_DIR}-{side}-row-{row}.json"


def trace_files(artifacts: Path) -> list[tuple[str, Path]]:
    """A job's traces under its artifacts directory, by the names they are uploaded under."""
    found = []
    for side in SIDES:
        for path in sorted((artifacts / PROFILE_DIR / side).glob("row-*.json")):
            row = path.stem.removeprefix("row-")
            if row.isdigit():
                found.append((trace_name(side, int(row)), path))
    return found


def chosen(bench: BenchmarkResult, count: int = MAX_PROFILE_ROWS) -> list[int]:
    """The indices of the rows that changed most (a change whose interval leaves out 1, by
    |log ratio|), else of the slowest rows."""
    changed = [
        (abs(math.log(r.change.ratio)), i)
        for i, r in enumerate(bench.rows)
        if r.change is not None and r.change.ratio > 0 and _changed(r)
    ]
    if changed:
        return [i for _, i in sorted(changed, key=lambda p: (-p[0], p[1]))[:count]]
    slowest = sorted(range(len(bench.rows)), key=lambda i: -bench.rows[i].kernel_ms)
    return slowest[:count]


def _changed(row: BenchmarkRow) -> bool:
    change = row.change
    assert change is not None
    if change.low is not None and change.low > 1:
        return True
    return change.high is not None and change.high < 1


def profile(step: Step, job: StepContext, tree: Tree, bench: BenchmarkResult) -> ProfileResult:
    """The chosen rows of `bench` profiled on both sides; traces under the artifacts."""
    settings = job.workflow.device.profiler
    activities = ",".join(settings.activities)
    rows = chosen(bench)
    if not rows:
        return ProfileResult(profiler=activities, message="no benchmark rows to profile")
    out = job.artifacts / PROFILE_DIR
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    sides: dict[str, Tree | None] = {"after": tree, "before": None}
    base = job.base_tree(step) if job.spec.options.compare else None
    if base is not None:
        sides["before"] = base_side(job, step, base)
    read: dict[str, dict[int, traces.Profile]] = {}
    for side, side_tree in sides.items():
        if side_tree is not None:
            read[side] = _run_side(step, job, side_tree, rows, out / side)
    return ProfileResult(
        profiler=activities,
        rows=[_row(bench.rows[i], i, read) for i in rows],
        message=None if read.get("after") else "the profiled run gave no trace",
    )


def _run_side(
    step: Step, job: StepContext, tree: Tree, rows: list[int], out: Path
) -> dict[int, traces.Profile]:
    """The step's command in `tree` through the shim; each profiled row's trace read back."""
    out.mkdir(parents=True, exist_ok=True)
    job.plugins.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(PLUGINS / f"{SHIM}.py", job.plugins / f"{SHIM}.py")
    settings = job.workflow.device.profiler
    env = {
        **tree.env,
        "PYTHONPATH": ":".join(filter(None, [str(job.plugins), tree.env.get("PYTHONPATH")])),
        "BENCH_PROFILE_DIR": str(out),
        "BENCH_PROFILE_ROWS": ",".join(str(i) for i in rows),
        "BENCH_PROFILE_TIMERS": ",".join(settings.timers),
        "BENCH_PROFILE_ACTIVITIES": ",".join(settings.activities),
        "BENCH_PROFILE_OP": job.spec.op,
    }
    argv = [step.argv[0], "-m", SHIM, *step.argv[1:]]
    shimmed = step.model_copy(update={"name": f"{step.name} (profile)", "argv": argv})
    outcome, _ = job.run(shimmed, Tree(tree.path, tree.python, env), job.artifacts / "profile-run")
    if outcome.exit_code != 0:
        job.log(f"profile in {tree.path.name}: exited {outcome.exit_code}")
    found: dict[int, traces.Profile] = {}
    for i in rows:
        path = out / f"row-{i}.json"
        try:
            found[i] = traces.parse(path.read_text(encoding="utf-8"))
        except (OSError, traces.TraceError) as exc:
            job.log(f"profile of row {i} in {tree.path.name}: {exc}")
    return found


def _row(row: BenchmarkRow, index: int, read: dict[str, dict[int, traces.Profile]]) -> ProfiledRow:
    """One row's kernels before → after, dearest (after, else before) first."""
    before = read.get("before", {}).get(index)
    after = read.get("after", {}).get(index)
    names: dict[str, KernelTime] = {}
    for side, prof in (("before", before), ("after", after)):
        for k in prof.kernels if prof is not None else []:
            kt = names.setdefault(k.name, KernelTime(name=k.name[:300]))
            names[k.name] = kt.model_copy(update={f"{side}_us": k.us, f"{side}_calls": k.calls})
    kernels = sorted(names.values(), key=lambda k: -max(k.after_us or 0.0, k.before_us or 0.0))
    return ProfiledRow(
        dtype=row.dtype,
        size=row.size[:16],
        ratio=row.change.ratio if row.change is not None else None,
        before_host_us=before.host_us if before is not None else None,
        after_host_us=after.host_us if after is not None else None,
        kernels=kernels[:MAX_PROFILE_KERNELS],
        traces=[trace_name(side, index) for side in SIDES if index in read.get(side, {})],
    )
