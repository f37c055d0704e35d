"""The before → after comparison's bars on a real FlagGems checkout: driver, patchers, reader.

    python -m tools.flaggems_bars OUT [OUT...] [--threshold 0.10] [--json FILE]
    python -m tools.flaggems_bars patch {comment,twice,quarter,host} FILE --func NAME [--index I]
    python -m tools.flaggems_bars workflows SRC FULL BENCH [--workers auto|on|off]
    python -m tools.flaggems_bars drive --steps "aa power others cost host main" --out OUT ...

`tools/gpu_flaggems_bars.sh` runs `drive` on a CUDA host: every job is the product's own
path, `ondemand run OP:nvidia --ref PR --base main --json ...`, on FlagGems with a settings
file of `compare: {gate: fail}` on main. Each job leaves `OUT/jobs/NAME.json` (its
JobResult), `NAME.meta.json` (what the pull request was, its exit status and wall time,
whether the runner was warm), the report and the tail of its log, as soon as it ends, so a
call cut short still returns what it finished. The reader (the first form) prints the bars
from those files with PASS, FAIL or MISSING each; exit 0 when none fails or is missing.

The bars, per operator (a row's verdict and band are the report's: `report.verdicts`):

- A/A (comment-only pull requests): no row flagged; at most 10 % of the rows too noisy to
  judge; the median after/before over all rows within ±2 % (no order bias).
- twice (the operator's work done twice, the second result returned): at least 95 % of all
  rows flagged slower, and the gate fails the job.
- quarter (one more in-place pass over the first quarter of the result): every row whose
  band is under the threshold flagged slower.
- cost: every FlagGems job on a warm runner (not the first of its call) at most 150 s to its
  verdict; this repository's warm job at most 45 s.
- host (the host step's operator, `gelu`: its wrapper spends `--host-us` more µs of Python a
  call): its A/A runs flag no host row (nor any other); every host-bound row of the host pull
  request is flagged slower on its host time, and the gate fails the job.
- main (default-branch runs): comment-only commits pushed one after another to a branch that
  stands for main, each run as the service runs a push (`--ref` the new commit, `--base` the
  commit before it, which ran): the A/A bars, as for pull requests.

Each row's smallest detectable change is the threshold plus its band (the A/A runs' median);
a host-judged row's host band, smallest detectable host change and the spread of its
processes' host times are printed beside it.
"""

from __future__ import annotations

import argparse
import ast
import fnmatch
import io
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
import tokenize
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

MAIN_OP = "adaptive_max_pool3d_backward"
TRUNK = "trunk"  # the main step's stand-in for the default branch
OTHER_OPS = ("exp", "vdot")  # bandwidth-bound with 1 Gi-element rows; host-bound 64–65536
HOST_OP = "gelu"  # the host step's: host ~150 µs a call on its small rows, no autotuner
HOST_US = 30.0  # the Python the host edit adds to each call (µs)
PATCH_KINDS = ("comment", "twice", "quarter", "host")
AA_NOISY_MAX = 0.10
AA_BIAS_MAX = 0.02
TWICE_SHARE = 0.95
FLAGGEMS_COST_S = 150.0
SELF_COST_S = 45.0
SELF_JOB_S = 90.0  # this repository's fresh full job, before one has been seen (75 s before)
MARK = "ondemand bars"  # in every patch, so a second patch of the same file is refused


class PatchError(ValueError):
    """A patch that cannot apply to the file as it is: its anchor is missing."""


# ---------------------------------------------------------------------------------------------
# Patchers: pure text → text, each checked (the comment edit leaves the AST as it was; the
# code edits need a top-level `def FUNC`, and the result must parse).


def _comments(text: str) -> list[tokenize.TokenInfo]:
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    return [t for t in tokens if t.type == tokenize.COMMENT and not t.string.startswith("#!")]


def comment_edit(text: str, index: int) -> str:
    """Edit the `index`-th comment counted from the end of the file (1: the last), so that
    pull requests 1, 2, … each change a different comment; the code is left as it was."""
    comments = _comments(text)
    if not 1 <= index <= len(comments):
        raise PatchError(f"comment {index} asked, the file has {len(comments)} comments")
    token = comments[-index]
    lines = text.splitlines(keepends=True)
    row, col = token.start[0] - 1, token.end[1]
    lines[row] = f"{lines[row][:col]} ({MARK}: A/A {index}){lines[row][col:]}"
    edited = "".join(lines)
    if ast.dump(ast.parse(edited)) != ast.dump(ast.parse(text)):  # pragma: no cover - a guard
        raise PatchError("the comment edit changed the code")
    return edited


def _check_function(text: str, func: str) -> None:
    if any(f"_ondemand_{kind}_{func} =" in text for kind in ("once", "exact", "host")):
        raise PatchError(f"{func} is already patched")
    tree = ast.parse(text)
    if not any(isinstance(node, ast.FunctionDef) and node.name == func for node in tree.body):
        raise PatchError(f"no top-level `def {func}(` in the file")


def twice_edit(text: str, func: str) -> str:
    """Rebind `func` to call its body twice and return the second result: twice the work,
    host and device, with the same output."""
    _check_function(text, func)
    edited = text.rstrip("\n") + (
        f"\n\n\n_ondemand_once_{func} = {func}\n\n\n"
        f"def {func}(*args, **kwargs):  # noqa: F811 ({MARK}: the work done twice)\n"
        f"    _ondemand_once_{func}(*args, **kwargs)\n"
        f"    return _ondemand_once_{func}(*args, **kwargs)\n"
    )
    ast.parse(edited)
    return edited


def quarter_edit(text: str, func: str) -> str:
    """Rebind `func` to compute its result, then pass once more, in place, over the first
    quarter of it (multiplied by 1: the values stay). On a bandwidth-bound elementwise
    operator that is a quarter of its traffic again (+25 %); on a launch-bound row, one launch
    more (the report's measured change says how much that was)."""
    _check_function(text, func)
    edited = text.rstrip("\n") + (
        f"\n\n\n_ondemand_exact_{func} = {func}\n\n\n"
        f"def {func}(*args, **kwargs):  # noqa: F811 ({MARK}: a quarter more work)\n"
        f"    out = _ondemand_exact_{func}(*args, **kwargs)\n"
        "    first = out[0] if isinstance(out, tuple) else out\n"
        "    flat = first.view(-1) if first.is_contiguous() else first.reshape(-1)\n"
        "    flat[: max(1, flat.numel() // 4)].mul_(1)\n"
        "    return out\n"
    )
    ast.parse(edited)
    return edited


def host_edit(text: str, func: str, us: float = HOST_US) -> str:
    """Rebind `func` to spend `us` µs of Python (a loop on the clock) before calling the
    original: host work added to every call, as a contributor's extra argument checks or
    bookkeeping in an operator's wrapper would, none on the device, the output unchanged."""
    _check_function(text, func)
    edited = text.rstrip("\n") + (
        f"\n\n\nimport time as _ondemand_time  # noqa: E402 ({MARK})\n\n"
        f"_ondemand_host_{func} = {func}\n\n\n"
        f"def {func}(*args, **kwargs):  # noqa: F811 ({MARK}: {us:g} µs more Python a call)\n"
        f"    end = _ondemand_time.perf_counter() + {us / 1e6!r}\n"
        "    while _ondemand_time.perf_counter() < end:\n"
        "        pass\n"
        f"    return _ondemand_host_{func}(*args, **kwargs)\n"
    )
    ast.parse(edited)
    return edited


def patch_file(path: Path, kind: str, func: str, index: int = 1, us: float = HOST_US) -> None:
    """Apply one patch in place; PatchError (the file untouched) when it cannot."""
    text = path.read_text()
    if kind == "comment":
        edited = comment_edit(text, index)
    elif kind == "twice":
        edited = twice_edit(text, func)
    elif kind == "quarter":
        edited = quarter_edit(text, func)
    elif kind == "host":
        edited = host_edit(text, func, us)
    else:
        raise PatchError(f"unknown patch {kind!r}; known: {', '.join(PATCH_KINDS)}")
    path.write_text(edited)


# ---------------------------------------------------------------------------------------------
# Workflow copies: no extra installed (the GPU image is offline), and one without accuracy.


def write_workflows(
    src: Path, full: Path, bench: Path, workers: str = "auto", host: dict[str, float] | None = None
) -> bool:
    """Copy every workflow of `src` into `full` (no extras) and `bench` (no accuracy step
    either). `workers`: set `compare.workers: true` on the flaggems layout's benchmark step
    where the runner knows that field (auto), always (on: an error where it does not), or
    leave the copy as it is (off). `host`: `compare` fields of that step to set (e.g.
    `host_processes`; an error where the runner does not know one). Returns whether the
    copies set `workers`."""
    import yaml

    from workflows.spec import Compare, load_workflows

    known = "workers" in Compare.model_fields
    if workers == "on" and not known:
        raise SystemExit("compare.workers: this runner's workflow schema has no such field")
    unknown = sorted(set(host or {}) - set(Compare.model_fields))
    if unknown:
        raise SystemExit(f"compare.{unknown[0]}: this runner's workflow schema has no such field")
    set_workers = known and workers != "off"
    for out in (full, bench):
        out.mkdir(parents=True, exist_ok=True)
    for path in sorted(src.glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        doc.setdefault("python_env", {})["extras"] = []
        for step in doc.get("layouts", {}).get("flaggems", []):
            if set_workers and step.get("kind") == "benchmark":
                step.setdefault("compare", {})["workers"] = True
            if host and step.get("kind") == "benchmark":
                step.setdefault("compare", {}).update(host)
        (full / path.name).write_text(yaml.safe_dump(doc, sort_keys=False))
        doc["steps"] = [s for s in doc["steps"] if s.get("kind") != "accuracy"]
        for name, steps in doc.get("layouts", {}).items():
            doc["layouts"][name] = [s for s in steps if s.get("kind") != "accuracy"]
        (bench / path.name).write_text(yaml.safe_dump(doc, sort_keys=False))
    load_workflows(full), load_workflows(bench)  # both must still load
    return set_workers


# ---------------------------------------------------------------------------------------------
# The driver: checkouts, pull requests, jobs, each with the step's deadline.


def git(repo: Path, *args: str) -> str:
    argv = ["git", "-C", str(repo), "-c", "user.name=pr", "-c", "user.email=pr@example.org"]
    return subprocess.run([*argv, *args], check=True, capture_output=True, text=True).stdout


def init_checkout(repo: Path, files: Path | None = None, tarball: Path | None = None) -> None:
    """A fresh git repository at `repo` (main): the tree from `tarball` or a copy of the
    `files` listed by git in that tree, with `.github/ondemand.yml` of `compare: {gate: fail}`."""
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir(parents=True)
    if tarball is not None:
        with tarfile.open(tarball) as tar:
            tar.extractall(repo, filter="data")
    elif files is not None:
        for name in tree_files(files):
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(files / name, repo / name)
    (repo / ".github").mkdir(exist_ok=True)
    (repo / ".github" / "ondemand.yml").write_text("compare:\n  gate: fail\n")
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "main, with compare: {gate: fail}")


# Never copied into this repository's checkout: caches, the carried inputs, results.
NOT_COPIED = frozenset(
    {".git", ".device", ".whl", ".venv", "gpu-out", "__pycache__", ".pytest_cache",
     ".ruff_cache", ".hypothesis", ".ondemand"}
)  # fmt: skip


def tree_files(top: Path) -> list[str]:
    """The files of `top` as git lists them (tracked and untracked, less the ignored), or, in
    a copy without .git, every file outside NOT_COPIED."""
    try:
        listed = subprocess.run(
            ["git", "-C", str(top), "ls-files", "-z", "--cached", "--others",
             "--exclude-standard"],
            check=True, capture_output=True,
        ).stdout.decode().split("\0")  # fmt: skip
        names = [n for n in listed if n and (top / n).is_file()]
        if names:
            return [n for n in names if not NOT_COPIED.intersection(Path(n).parts)]
    except (OSError, subprocess.CalledProcessError):
        pass
    return sorted(
        str(p.relative_to(top))
        for p in top.rglob("*")
        if p.is_file() and not NOT_COPIED.intersection(p.relative_to(top).parts)
    )


def make_branch(
    repo: Path, name: str, path: str, kind: str, func: str, index: int = 1, us: float = HOST_US
) -> None:
    """A pull request `name` off main: one patch of `path`, committed."""
    git(repo, "checkout", "-q", "-b", name, "main")
    try:
        patch_file(repo / path, kind, func, index, us)
        git(repo, "commit", "-qam", f"{name}: {kind} edit of {path}")
    finally:
        git(repo, "checkout", "-q", "-f", "main")


def push_trunk(repo: Path, path: str, func: str, pushes: int) -> None:
    """`pushes` comment-only commits, one after another, on TRUNK off main: the default
    branch as a repository's pushes leave it, each commit's run based on the one before."""
    git(repo, "checkout", "-q", "-b", TRUNK, "main")
    try:
        for i in range(1, pushes + 1):
            patch_file(repo / path, "comment", func, i)
            git(repo, "commit", "-qam", f"{TRUNK} push {i}: comment edit of {path}")
    finally:
        git(repo, "checkout", "-q", "-f", "main")


@dataclass
class Deadline:
    """Seconds from `start`: the call's whole limit and the current step's."""

    call_s: float
    start: float = field(default_factory=time.monotonic)
    step_end: float = float("inf")

    def step(self, seconds: float) -> None:
        self.step_end = time.monotonic() + seconds

    def left(self) -> float:
        return min(self.start + self.call_s, self.step_end) - time.monotonic()


@dataclass(frozen=True)
class Job:
    """One `ondemand run` of the bars: which pull request, of which operator, how."""

    name: str
    op: str
    kind: str  # aa, twice, quarter
    ref: str
    repo: Path
    workflows: Path
    full: bool
    source: str  # flaggems, self
    extra: tuple[str, ...] = ()
    backend: str = "nvidia"  # cpu: a dry run of the path, on this repository only
    base: str = "main"  # a default-branch run's: the commit before its own

    def argv(self, json_path: Path) -> list[str]:
        return [
            sys.executable, "-m", "ondemand", "run", f"{self.op}:{self.backend}",
            "--repo", str(self.repo), "--ref", self.ref, "--base", self.base,
            "--workflows", str(self.workflows), "-q", "--json", str(json_path), *self.extra,
        ]  # fmt: skip


@dataclass
class Driver:
    out: Path
    deadline: Deadline
    job_s: float = 150.0  # how long a job is expected to take, until one has been seen
    skip: tuple[str, ...] = ()  # job names (globs) done in an earlier call
    seen: dict[tuple[str, bool], float] = field(default_factory=dict)  # the longest job's time
    ran: set[str] = field(default_factory=set)  # sources with a job ended this call
    run: Callable[..., subprocess.CompletedProcess[bytes]] = subprocess.run

    def job(self, job: Job) -> dict[str, Any] | None:
        """Run `job` if the deadline leaves time for it; its meta record (None: not started)."""
        if any(fnmatch.fnmatchcase(job.name, pattern) for pattern in self.skip):
            print(f"{job.name}: skipped (done in an earlier call)")
            return None
        key = (job.source, job.full)
        first = SELF_JOB_S if job.source == "self" else self.job_s
        expect = max(self.seen.get(key, first), 30.0)
        left = self.deadline.left()
        if left < expect:
            print(f"{job.name}: not started ({left:.0f} s left, {expect:.0f} s expected)")
            return None
        jobs = self.out / "jobs"
        jobs.mkdir(parents=True, exist_ok=True)
        result = jobs / f"{job.name}.json"
        result.unlink(missing_ok=True)
        warm = job.source in self.ran
        started = datetime.now()  # local, as nvidia-smi's log stamps its samples
        start = time.monotonic()
        try:
            done = self.run(job.argv(result), capture_output=True, timeout=max(left - 5, 30))
            code, stdout, stderr = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as exc:
            code, stdout, stderr = 124, exc.stdout or b"", exc.stderr or b""
        wall = time.monotonic() - start
        self.seen[key] = max(self.seen.get(key, 0.0), wall)
        self.ran.add(job.source)
        (jobs / f"{job.name}.md").write_bytes(stdout)
        tail = stderr.decode(errors="replace").splitlines()[-80:]
        (jobs / f"{job.name}.stderr.txt").write_text("\n".join(tail) + "\n")
        meta = {
            "name": job.name, "op": job.op, "kind": job.kind, "ref": job.ref,
            "source": job.source, "full": job.full, "warm": warm, "exit": code,
            "wall_s": round(wall, 1), "result": result.name if result.exists() else None,
            "started": started.isoformat(), "ended": datetime.now().isoformat(),
        }  # fmt: skip
        (jobs / f"{job.name}.meta.json").write_text(json.dumps(meta, indent=1) + "\n")
        print(f"{job.name}: exit {code} in {wall:.1f} s ({'warm' if warm else 'fresh'})")
        return meta


def op_path(op: str) -> str:
    return f"src/flag_gems/ops/{op}.py"


def drive(args: argparse.Namespace, run: Callable[..., Any] = subprocess.run) -> int:
    """Run the chosen steps in order, each within its own deadline and the call's (`run`
    starts each job's command: a fake in tests)."""
    out: Path = args.out
    work: Path = args.work
    shutil.rmtree(work, ignore_errors=True)  # every call starts fresh: its first job is cold
    work.mkdir(parents=True)
    deadline = Deadline(args.deadline_s)
    driver = Driver(out, deadline, job_s=args.job_s, skip=tuple(args.skip.split()), run=run)
    steps = args.steps.split()
    unknown = set(steps) - {"aa", "power", "others", "cost", "host", "main"}
    if unknown:
        raise SystemExit(f"unknown steps: {', '.join(sorted(unknown))}")
    host: dict[str, float] = {}
    if args.host_processes:
        host["host_processes"] = args.host_processes
    if args.host_budget_s:
        host["host_budget_s"] = args.host_budget_s
    workers = write_workflows(Path(args.workflows_src), work / "wf-full", work / "wf-bench",
                              args.workers, host)  # fmt: skip
    print(f"workflow copies: compare.workers {'set' if workers else 'not set'}")
    fg = work / "flaggems"
    others = args.others.split()
    fg_extra: list[str] = ["--wheelhouse", str(args.wheelhouse)]
    if not args.compile_cache:
        fg_extra.append("--no-compile-cache")
    if any(s in steps for s in ("aa", "power", "others", "host", "main")):
        init_checkout(fg, tarball=args.tarball)
    if any(s in steps for s in ("aa", "power", "others")):
        for op in (args.op, *others):
            for i in range(1, (args.aa if op == args.op else args.other_aa) + 1):
                make_branch(fg, f"{op}-aa{i}", op_path(op), "comment", op, i)
            make_branch(fg, f"{op}-twice", op_path(op), "twice", op)
        make_branch(fg, f"{args.op}-quarter", op_path(args.op), "quarter", args.op)
        for op in others if args.other_quarter else ():
            make_branch(fg, f"{op}-quarter", op_path(op), "quarter", op)
    if "host" in steps:
        if args.host_op in (args.op, *others) and any(s in steps for s in ("aa", "others")):
            raise SystemExit(f"--host-op {args.host_op}: an operator of the other steps too")
        for i in range(1, args.host_aa + 1):
            make_branch(fg, f"{args.host_op}-aa{i}", op_path(args.host_op), "comment",
                        args.host_op, i)  # fmt: skip
        make_branch(fg, f"{args.host_op}-host", op_path(args.host_op), "host", args.host_op,
                    us=args.host_us)  # fmt: skip
    if "main" in steps:
        push_trunk(fg, op_path(args.main_op), args.main_op, args.main_aa)
    os.environ["XDG_CACHE_HOME"] = str(work / "cache-fg")

    def fg_job(op: str, kind: str, full: bool = False) -> bool:
        """Run one FlagGems job; whether it ran."""
        wf = work / ("wf-full" if full else "wf-bench")
        name = f"fg-{op}-{kind}"
        return driver.job(Job(name, op, kind.rstrip("0123456789"), f"{op}-{kind}", fg, wf,
                              full, "flaggems", tuple(fg_extra))) is not None  # fmt: skip

    for step in steps:
        deadline.step(getattr(args, f"{step}_s"))
        print(f"== step {step}: {deadline.left():.0f} s")
        if step == "aa":
            full_ran = False  # the cost bar's full job: the first A/A on a warm runner
            for i in range(1, args.aa + 1):
                full = not full_ran and ("flaggems" in driver.ran or args.full_first)
                if fg_job(args.op, f"aa{i}", full=full) and full:
                    full_ran = True
        elif step == "power":
            fg_job(args.op, "twice")
            fg_job(args.op, "quarter")
        elif step == "others":
            for op in others:  # both bars' first data for each operator before more A/A
                fg_job(op, "aa1")
                fg_job(op, "twice")
            for op in others if args.other_quarter else ():
                fg_job(op, "quarter")
            for i in range(2, args.other_aa + 1):
                for op in others:
                    fg_job(op, f"aa{i}")
        elif step == "host":
            # The first A/A on the fresh runner, then the host pull request and the other
            # A/A runs warm; with --full-warm the last A/A runs the accuracy tests too.
            fg_job(args.host_op, "aa1")
            fg_job(args.host_op, "host")
            for i in range(2, args.host_aa + 1):
                fg_job(args.host_op, f"aa{i}", full=args.full_warm and i == args.host_aa)
        elif step == "main":
            for i in range(1, args.main_aa + 1):
                back = args.main_aa - i  # the i-th push is trunk~back; it ran on the one before
                driver.job(Job(f"fg-{args.main_op}-main{i}", args.main_op, "main",
                               f"{TRUNK}~{back}", fg, work / "wf-bench", False, "flaggems",
                               tuple(fg_extra), base=f"{TRUNK}~{back + 1}"))  # fmt: skip
        elif step == "cost":
            own = work / "self"
            init_checkout(own, files=Path(args.self_repo))
            path = f"kernels/ops/{MAIN_OP}/__init__.py"
            make_branch(own, "aa1", path, "comment", MAIN_OP, 1)
            os.environ["XDG_CACHE_HOME"] = str(work / "cache-self")
            extra = ("--wheelhouse", str(args.self_wheelhouse)) if args.self_wheelhouse else ()
            for name in ("self-fresh", "self-warm"):
                driver.job(Job(name, args.self_op, "aa", "aa1", own, work / "wf-full", True,
                               "self", extra, args.backend))  # fmt: skip
            os.environ["XDG_CACHE_HOME"] = str(work / "cache-fg")
    return 0


# ---------------------------------------------------------------------------------------------
# The reader.


@dataclass(frozen=True)
class Run:
    meta: dict[str, Any]
    result: Any  # JobResult | None

    @property
    def name(self) -> str:
        return str(self.meta["name"])

    def judged(self, threshold: float) -> list[Any]:
        from report.verdicts import judged_rows

        bench = self.result.benchmark if self.result is not None else None
        return judged_rows(bench, threshold) if bench is not None else []


def load_runs(dirs: Sequence[Path]) -> list[Run]:
    """Every job's meta record under `dirs` (searched recursively), with its JobResult."""
    from workflows.models import JobResult

    runs: dict[str, Run] = {}
    for top in dirs:
        for path in sorted(top.rglob("*.meta.json")):
            meta = json.loads(path.read_text())
            result = None
            if meta.get("result"):
                json_path = path.parent / meta["result"]
                if json_path.exists():
                    result = JobResult.model_validate_json(json_path.read_text())
            runs[meta["name"]] = Run(meta, result)  # a later directory's run replaces
    return list(runs.values())


@dataclass(frozen=True)
class Bar:
    name: str
    op: str
    measured: str
    met: bool | None  # None: no data

    @property
    def verdict(self) -> str:
        return "MISSING" if self.met is None else "PASS" if self.met else "FAIL"


def row_name(judged: Any) -> str:
    row = judged.row
    size = ",".join(map(str, row.size))
    if row.output_size:
        size += "→" + ",".join(map(str, row.output_size))
    return f"{row.dtype} {size}"


def _pct(x: float) -> str:
    return f"{x * 100:+.1f} %"


def op_bars(op: str, runs: Sequence[Run], threshold: float) -> tuple[list[Bar], list[str]]:
    """The A/A, twice and quarter bars of one operator's runs, and its per-row lines."""
    from report.verdicts import Verdict, detectable, host_judged
    from tools.compare_bars import Run as CompareRun
    from tools.compare_bars import status_with_gate

    bars: list[Bar] = []
    lines: list[str] = []
    kinds = ("aa", "twice", "quarter", "host", "main")
    of = {k: [r for r in runs if r.meta["kind"] == k] for k in kinds}
    flagged_kinds = (Verdict.slower, Verdict.faster)

    aa = [(r, j) for r in of["aa"] for j in r.judged(threshold)]
    if aa or not of["main"]:
        bars += _aa_bars("A/A", op, of["aa"], threshold, "pull requests")
    if of["main"]:
        bars += _aa_bars("main A/A", op, of["main"], threshold, "default-branch runs")
    aa_host = host_judged([j for _, j in aa] + [j for r in of["main"] for j in r.judged(threshold)])
    if aa_host:
        flagged = [j for j in aa_host if j.host_verdict in flagged_kinds]
        noisy = [j for j in aa_host if j.host_verdict is Verdict.noisy]
        bars.append(
            Bar("A/A: no host row flagged", op,
                f"{len(flagged)} of {len(aa_host)} host verdicts flagged; {len(noisy)} host too "
                f"noisy", not flagged)
        )  # fmt: skip

    host = [j for r in of["host"] for j in r.judged(threshold)]
    if host:
        bars += _host_bars(op, of["host"], host, threshold)
    elif of["host"]:
        bars.append(Bar("host", op, _why_missing(of["host"]), None))

    twice = [j for r in of["twice"] for j in r.judged(threshold)]
    if twice:
        slower = [j for j in twice if j.verdict is Verdict.slower]
        share = len(slower) / len(twice)
        bars.append(
            Bar(f"twice: ≥{TWICE_SHARE:.0%} of rows slower", op,
                f"{len(slower)} of {len(twice)} ({share:.0%}); median change "
                f"{_pct(statistics.median(j.change.ratio for j in twice) - 1)}",
                share >= TWICE_SHARE)
        )  # fmt: skip
        states = []
        for r in of["twice"]:
            if r.result is not None:
                path = Path(r.name)
                state = status_with_gate(CompareRun("power", path, r.result), threshold)
                states.append((state, r.meta.get("exit")))
        failed = bool(states) and all(s == "failure" and e in (1, None) for s, e in states)
        bars.append(Bar("twice: the gate fails", op,
                        ", ".join(f"{s} (exit {e})" for s, e in states), failed))  # fmt: skip
    elif of["twice"] or not of["host"]:
        bars.append(Bar("twice", op, _why_missing(of["twice"]), None))

    quarter = [j for r in of["quarter"] for j in r.judged(threshold)]
    if quarter:
        judgeable = [j for j in quarter if j.band is not None and j.band < threshold]
        slower = [j for j in judgeable if j.verdict is Verdict.slower]
        moved = statistics.median(j.change.ratio for j in quarter) - 1
        bars.append(
            Bar(f"quarter: every row with a band under ±{threshold:.0%} slower", op,
                f"{len(slower)} of {len(judgeable)}; {len(quarter) - len(judgeable)} too "
                f"noisy; median change {_pct(moved)}",
                bool(judgeable) and len(slower) == len(judgeable))
        )  # fmt: skip
    elif of["quarter"] or op == MAIN_OP:
        bars.append(Bar("quarter", op, _why_missing(of["quarter"]), None))

    per_row: dict[str, dict[str, list[Any]]] = {}
    kinds_judged = (("aa", [j for _, j in aa]), ("twice", twice), ("quarter", quarter),
                    ("host", host))  # fmt: skip
    for kind, judged in kinds_judged:
        for j in judged:
            per_row.setdefault(row_name(j), {}).setdefault(kind, []).append(j)
    if per_row:
        lines.append(f"{op}: per row (A/A band median · smallest detectable slowdown · twice · "
                     "quarter):")  # fmt: skip
        for row, kinds in per_row.items():
            bands = [j.band for j in kinds.get("aa", []) if j.band is not None]
            found = [d for j in kinds.get("aa", []) if (d := detectable(j.change, threshold))]
            band = f"±{statistics.median(bands) * 100:.1f} %" if bands else "±?"
            detect = f"+{statistics.median(found) * 100:.1f} %" if found else "none"
            cells = [band, detect]
            for kind in ("twice", "quarter"):
                js = kinds.get(kind, [])
                cells.append(
                    ", ".join(f"{_pct(j.change.ratio - 1)} {j.verdict.value}" for j in js) or "–"
                )
            host_cells = _host_cells(kinds, threshold)
            if host_cells:
                cells.append(host_cells)
            lines.append(f"  {row}: " + " · ".join(cells))
    return bars, lines


def _aa_bars(what: str, op: str, runs: Sequence[Run], threshold: float, unit: str) -> list[Bar]:
    """Comment-only runs' bars: no row flagged, few too noisy, no order bias."""
    from report.verdicts import Verdict

    judged = [j for r in runs for j in r.judged(threshold)]
    if not judged:
        return [Bar(what, op, _why_missing(runs), None)]
    n = sum(1 for r in runs if r.result is not None and r.result.benchmark is not None)
    flagged = [j for j in judged if j.verdict in (Verdict.slower, Verdict.faster)]
    noisy = [j for j in judged if j.verdict is Verdict.noisy]
    bias = statistics.median(j.change.ratio for j in judged)
    share = len(noisy) / len(judged)
    return [
        Bar(f"{what}: no row flagged", op,
            f"{len(flagged)} of {len(judged)} row verdicts flagged ({n} {unit})", not flagged),
        Bar(f"{what}: ≤{AA_NOISY_MAX:.0%} too noisy", op,
            f"{len(noisy)} of {len(judged)} ({share:.0%})", share <= AA_NOISY_MAX),
        Bar(f"{what}: median after/before within ±{AA_BIAS_MAX:.0%}", op, f"{bias:.4f}",
            abs(bias - 1) <= AA_BIAS_MAX),
    ]  # fmt: skip


def _host_bars(op: str, runs: Sequence[Run], judged: Sequence[Any], threshold: float) -> list[Bar]:
    """The host pull request's bars: every host-bound row flagged slower on its host time (a
    row with no host verdict, or too noisy, counts against it), and the gate failing."""
    from report.verdicts import Verdict, host_judged
    from tools.compare_bars import Run as CompareRun
    from tools.compare_bars import status_with_gate

    bound = host_judged(judged)
    slower = [j for j in bound if j.host_verdict is Verdict.slower]
    noisy = [j for j in bound if j.host_verdict is Verdict.noisy]
    device = [j for j in judged if j.device_verdict is Verdict.slower]
    moved = [_pct(j.host_change.ratio - 1) for j in slower if j.host_change is not None]
    states = []
    for r in runs:
        if r.result is not None:
            state = status_with_gate(CompareRun("power", Path(r.name), r.result), threshold)
            states.append((state, r.meta.get("exit")))
    failed = bool(states) and all(s == "failure" and e in (1, None) for s, e in states)
    return [
        Bar("host: every host-bound row slower on host time", op,
            f"{len(slower)} of {len(bound)} host-bound rows ({', '.join(moved) or 'none'}); "
            f"{len(noisy)} host too noisy; {len(device)} rows slower on the device",
            bool(bound) and len(slower) == len(bound)),
        Bar("host: the gate fails", op, ", ".join(f"{s} (exit {e})" for s, e in states), failed),
    ]  # fmt: skip


def _host_cells(kinds: dict[str, list[Any]], threshold: float) -> str:
    """A row's host figures, where its host time was judged: the A/A runs' median host band,
    smallest detectable host slowdown and spread of one process's host time (the median over
    the A/A runs of the log standard deviation of the processes' medians), and the host
    pull request's host change with its verdict."""
    from report.verdicts import detectable, noise_band

    aa = [j for j in kinds.get("aa", []) if j.host_verdict is not None and j.host_change]
    host = [j for j in kinds.get("host", []) if j.host_verdict is not None and j.host_change]
    if not aa and not host:
        return ""
    bands = [b for j in aa if (b := noise_band(j.host_change)) is not None]
    found = [d for j in aa if (d := detectable(j.host_change, threshold))]
    spreads = [s for j in aa if (s := _process_spread(j.row)) is not None]
    cells = [
        f"host band ±{statistics.median(bands) * 100:.1f} %" if bands else "host band ±?",
        f"+{statistics.median(found) * 100:.1f} %" if found else "none",
        f"process spread {statistics.median(spreads) * 100:.1f} %" if spreads else "spread ?",
    ]
    if host:
        cells.append(", ".join(
            f"host {_pct(j.host_change.ratio - 1)} {j.host_verdict.value}" for j in host
        ))  # fmt: skip
    return " ".join(["host:", " · ".join(cells)])


def _process_spread(row: Any) -> float | None:
    """The standard deviation of one process's log host time, the sides pooled; None with
    fewer than two processes a side."""
    sides = [row.kernel_host_process_us or [], row.before_kernel_host_process_us or []]
    if any(len(side) < 2 for side in sides):
        return None
    logs = [[math.log(v) for v in side if v > 0] for side in sides]
    return math.sqrt(statistics.mean(statistics.variance(side) for side in logs))


def _why_missing(runs: Sequence[Run]) -> str:
    if not runs:
        return "not run"
    return "; ".join(
        f"{r.name}: exit {r.meta.get('exit')}"
        + (f", {r.result.status.value} ({r.result.error_step})" if r.result is not None else "")
        for r in runs
    )


def cost_bars(runs: Sequence[Run], threshold: float) -> list[Bar]:
    """Wall time to the verdict (the job's own duration) on a warm runner. A verdict that
    judged no row in time is not one: a warm job whose rows got fewer than the six rounds a
    verdict needs, or that ran past the limit without a result (the call's deadline killed
    it), fails the bar however fast it ended."""
    from runner.job.kinds.benchmark.comparison import MIN_ROUNDS

    bars = []
    for source, limit, what in (
        ("flaggems", FLAGGEMS_COST_S, "cost: warm FlagGems job to verdict"),
        ("self", SELF_COST_S, "cost: this repository's warm job to verdict"),
    ):
        ours = [r for r in runs if r.meta["source"] == source]
        timed = [
            (r, r.result.duration_s) for r in ours if r.result is not None and r.result.duration_s
        ]
        warm = [(r, d) for r, d in timed if r.meta.get("warm")]
        unjudged = [
            r.name for r, _ in warm
            if r.result.benchmark is not None
            and any(j.change.rounds < MIN_ROUNDS for j in r.judged(threshold))
        ]  # fmt: skip
        killed = [
            f"{r.name} (no verdict after {r.meta.get('wall_s')} s)" for r in ours
            if r.result is None and r.meta.get("warm") and float(r.meta.get("wall_s") or 0) > limit
        ]  # fmt: skip
        if not warm and not killed:
            fresh = ", ".join(f"{r.name} {d:.1f} s (fresh)" for r, d in timed)
            bars.append(Bar(f"{what} ≤{limit:g} s", source, fresh or "no warm job", None))
            continue
        said = ""
        if warm:
            worst = max(warm, key=lambda rd: rd[1])
            said = f"max {worst[1]:.1f} s ({worst[0].name}) of {len(warm)} warm jobs"
        full = [f"{r.name} {d:.1f} s" for r, d in warm if r.meta.get("full")]
        if full:
            said += f"; full: {', '.join(full)}"
        fresh = [f"{r.name} {d:.1f} s" for r, d in timed if not r.meta.get("warm")]
        if fresh:
            said += f"; fresh: {', '.join(fresh)}"
        if unjudged:
            said += f"; fewer than {MIN_ROUNDS} rounds, so no verdict: {', '.join(unjudged)}"
        if killed:
            said += f"; {', '.join(killed)}"
        met = bool(warm) and max(d for _, d in warm) <= limit and not unjudged and not killed
        bars.append(Bar(f"{what} ≤{limit:g} s", source, said.lstrip("; "), met))
    return bars


def report(runs: Sequence[Run], threshold: float) -> tuple[str, list[Bar]]:
    """The jobs, the per-row lines and the bars table, as text."""
    from report.verdicts import Verdict

    lines = [f"# FlagGems comparison bars: threshold ±{threshold * 100:g} %", ""]
    for r in sorted(runs, key=lambda r: r.name):
        judged = r.judged(threshold)
        counts = {v: sum(1 for j in judged if j.verdict is v) for v in Verdict}
        res = r.result
        status = res.status.value if res is not None else "no result"
        took = f"{res.duration_s:.1f} s" if res is not None and res.duration_s else "–"
        rounds = sorted(j.change.rounds for j in judged)
        lines.append(
            f"{r.name}: exit {r.meta.get('exit')}, {status}, verdict in {took} "
            f"(command {r.meta.get('wall_s')} s, {'warm' if r.meta.get('warm') else 'fresh'}"
            f"{', full' if r.meta.get('full') else ''}); "
            + (f"rounds {rounds[0]}–{rounds[-1]}; " if rounds else "")
            + ", ".join(f"{v.value} {counts[v]}" for v in Verdict)
        )
    done = sorted(r.name for r in runs if r.result is not None and r.result.benchmark is not None)
    lines += [f'finished, for a later call: SKIP="{" ".join(done)}"', ""]
    bars: list[Bar] = []
    fg_runs = [r for r in runs if r.meta["source"] == "flaggems"]
    host_ops = {r.meta["op"] for r in fg_runs if r.meta["kind"] == "host"}
    # A call of the host step alone: its operator's bars and its jobs' cost, nothing missing
    # of the other steps.
    host_only = bool(host_ops) and all(r.meta["op"] in host_ops for r in runs)
    fg_ops = sorted({r.meta["op"] for r in fg_runs} | (set() if host_only else {MAIN_OP}),
                    key=lambda op: (op != MAIN_OP, op))  # fmt: skip
    for op in fg_ops:
        ob, ol = op_bars(op, [r for r in runs if r.meta["op"] == op and
                              r.meta["source"] == "flaggems"], threshold)  # fmt: skip
        bars += ob
        lines += ol
    bars += [b for b in cost_bars(runs, threshold) if not host_only or b.op == "flaggems"]
    lines += ["", "| bar | operator | measured | verdict |", "|---|---|---|---|"]
    lines += [f"| {b.name} | {b.op} | {b.measured} | {b.verdict} |" for b in bars]
    return "\n".join(lines) + "\n", bars


# ---------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["patch"]:
        p = argparse.ArgumentParser(prog="python -m tools.flaggems_bars patch")
        p.add_argument("kind", choices=PATCH_KINDS)
        p.add_argument("file", type=Path)
        p.add_argument("--func", required=True)
        p.add_argument("--index", type=int, default=1)
        p.add_argument("--us", type=float, default=HOST_US, help="the host edit's µs a call")
        a = p.parse_args(argv[1:])
        try:
            patch_file(a.file, a.kind, a.func, a.index, a.us)
        except PatchError as exc:
            print(f"patch {a.kind} of {a.file}: {exc}", file=sys.stderr)
            return 2
        return 0
    if argv[:1] == ["workflows"]:
        p = argparse.ArgumentParser(prog="python -m tools.flaggems_bars workflows")
        p.add_argument("src", type=Path)
        p.add_argument("full", type=Path)
        p.add_argument("bench", type=Path)
        p.add_argument("--workers", choices=("auto", "on", "off"), default="auto")
        a = p.parse_args(argv[1:])
        print("compare.workers set" if write_workflows(a.src, a.full, a.bench, a.workers)
              else "compare.workers not set")  # fmt: skip
        return 0
    if argv[:1] == ["drive"]:
        return drive(drive_parser().parse_args(argv[1:]))
    p = argparse.ArgumentParser(prog="python -m tools.flaggems_bars", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    p.add_argument("dirs", nargs="+", type=Path, metavar="OUT")
    p.add_argument("--threshold", type=float, default=0.10)
    p.add_argument("--json", type=Path, help="also write the bars here")
    a = p.parse_args(argv)
    text, bars = report(load_runs(a.dirs), a.threshold)
    sys.stdout.write(text)
    if a.json:
        a.json.write_text(json.dumps([b.__dict__ | {"verdict": b.verdict} for b in bars],
                                     indent=1) + "\n")  # fmt: skip
    return 0 if all(b.met for b in bars) else 1


def drive_parser() -> argparse.ArgumentParser:
    """The options of `drive` (tools/gpu_flaggems_bars.sh passes them from its environment)."""
    p = argparse.ArgumentParser(prog="python -m tools.flaggems_bars drive")
    p.add_argument("--steps", default="aa power others cost")
    p.add_argument(
        "--full-first",
        action="store_true",
        help="the first A/A job runs the accuracy tests too, even on a fresh runner",
    )
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--work", type=Path, default=Path("/tmp/flaggems-bars"))
    p.add_argument("--tarball", type=Path, default=Path(".device/flaggems.tar.xz"))
    p.add_argument("--wheelhouse", type=Path, default=Path(".device/wheelhouse").resolve())
    p.add_argument("--self-repo", default=".")
    p.add_argument("--self-wheelhouse", type=Path, default=None)
    p.add_argument("--self-op", default=MAIN_OP)
    p.add_argument("--backend", default="nvidia", help="of this repository's jobs (cost)")
    p.add_argument("--workflows-src", default="workflows")
    p.add_argument("--workers", choices=("auto", "on", "off"), default="auto")
    p.add_argument("--op", default=MAIN_OP)
    p.add_argument("--others", default=" ".join(OTHER_OPS))
    p.add_argument("--aa", type=int, default=5)
    p.add_argument("--other-aa", type=int, default=2)
    p.add_argument("--other-quarter", action="store_true")
    p.add_argument("--compile-cache", action="store_true")
    p.add_argument("--host-op", default=HOST_OP, help="the host step's operator")
    p.add_argument("--host-aa", type=int, default=3, help="the host step's A/A pull requests")
    p.add_argument("--host-us", type=float, default=HOST_US,
                   help="the Python the host pull request adds to each call (µs)")  # fmt: skip
    p.add_argument("--host-processes", type=int, default=0,
                   help="compare.host_processes of the workflow copies (0: theirs)")  # fmt: skip
    p.add_argument("--host-budget-s", type=float, default=0.0,
                   help="compare.host_budget_s of the workflow copies (0: theirs)")  # fmt: skip
    p.add_argument("--full-warm", action="store_true",
                   help="the host step's last A/A job runs the accuracy tests too")  # fmt: skip
    p.add_argument("--main-op", default=HOST_OP, help="the main step's operator")
    p.add_argument("--main-aa", type=int, default=2,
                   help="the main step's comment-only pushes, each on the one before")  # fmt: skip
    p.add_argument("--job-s", type=float, default=150.0)
    p.add_argument("--skip", default="", help="job names (globs) not to run again")
    p.add_argument("--deadline-s", type=float, default=570.0)
    steps = (("aa", 570.0), ("power", 330.0), ("others", 570.0), ("cost", 300.0), ("host", 570.0),
             ("main", 400.0))  # fmt: skip
    for step, seconds in steps:
        p.add_argument(f"--{step}-s", type=float, default=seconds)
    return p


if __name__ == "__main__":
    sys.exit(main())
