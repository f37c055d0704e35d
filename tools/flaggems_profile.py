"""`/test profile`'s path on a real FlagGems checkout, on a CUDA host: the checkout from its
tarball (main), the "twice" pull request of one operator (its work done twice, as the bars
make it: `tools/flaggems_bars.py`), then `ondemand run OP:nvidia --ref OP-twice --base main
--profile` on the benchmark-only workflow copy. Prints each profiled row's kernels before →
after and names the kernel whose device time doubled; the traces are copied (gzip) and the
result written into OUT. Run by tools/gpu_flaggems_profile.sh; docs/h200/flaggems-profile.md.

    python -m tools.flaggems_profile --out OUT --tarball T --wheelhouse W [--op exp]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from tools.flaggems_bars import init_checkout, make_branch, op_path, write_workflows
from workflows.models import JobResult, ProfileResult
from workflows.spec import WORKFLOWS_DIR

DOUBLED = (1.7, 2.5)  # a kernel's after/before read as "twice the work"
TRACE_LINE = re.compile(r"^ondemand run: trace (\S+): (.+)$", re.MULTILINE)


def doubled(profile: ProfileResult) -> list[tuple[str, float]]:
    """(kernel, after/before) of every profiled kernel whose device time per call doubled."""
    found = []
    for row in profile.rows:
        for k in row.kernels:
            if k.before_us and k.after_us is not None:
                ratio = k.after_us / k.before_us
                if DOUBLED[0] <= ratio <= DOUBLED[1]:
                    found.append((k.name, ratio))
    return found


def describe(profile: ProfileResult) -> str:
    lines = [f"profiler: {profile.profiler}" + (f" ({profile.message})" if profile.message else "")]
    for row in profile.rows:
        lines.append(f"row {row.dtype} {row.size}: benchmark ratio {row.ratio}")
        lines.append(f"  host µs/call {row.before_host_us} -> {row.after_host_us}")
        for k in row.kernels:
            lines.append(f"  {k.before_us} -> {k.after_us} µs ×{k.after_calls}  {k.name}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tools.flaggems_profile")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--tarball", type=Path, required=True)
    p.add_argument("--wheelhouse", type=Path, required=True)
    p.add_argument("--op", default="exp")
    p.add_argument("--work", type=Path, default=Path("/tmp/ondemand-profile"))
    p.add_argument("--timeout-s", type=float, default=540)
    a = p.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    fg = a.work / "flaggems"
    init_checkout(fg, tarball=a.tarball)
    make_branch(fg, f"{a.op}-twice", op_path(a.op), "twice", a.op)
    write_workflows(WORKFLOWS_DIR, a.work / "wf-full", a.work / "wf-bench")
    result_path = a.out / "profile-result.json"
    argv_run = [
        sys.executable, "-m", "ondemand", "run", f"{a.op}:nvidia", "--repo", str(fg),
        "--ref", f"{a.op}-twice", "--base", "main", "--profile", "-q",
        "--workflows", str(a.work / "wf-bench"), "--wheelhouse", str(a.wheelhouse),
        "--json", str(result_path),
    ]  # fmt: skip
    done = subprocess.run(argv_run, capture_output=True, text=True, timeout=a.timeout_s)
    (a.out / "profile-report.md").write_text(done.stdout)
    (a.out / "profile-stderr.txt").write_text("\n".join(done.stderr.splitlines()[-200:]) + "\n")
    print(f"ondemand run: exit {done.returncode}")
    for name, path in TRACE_LINE.findall(done.stderr):
        (a.out / f"{name}.gz").write_bytes(gzip.compress(Path(path).read_bytes()))
    if not result_path.exists():
        print("no result written", file=sys.stderr)
        return 1
    result = JobResult.model_validate(json.loads(result_path.read_text()))
    if result.profile is None:
        print("the result holds no profile", file=sys.stderr)
        return 1
    print(describe(result.profile))
    found = doubled(result.profile)
    for name, ratio in found:
        print(f"doubled: {name} ({ratio:.2f}x)")
    if not found:
        print("no kernel's device time doubled", file=sys.stderr)
    return 0 if found else 1


if __name__ == "__main__":
    sys.exit(main())
