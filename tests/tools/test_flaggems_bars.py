"""tools.flaggems_bars: the reader's bars on job results with known verdicts, the patchers on
small files and on FlagGems' own (when its snapshot is here), the driver's bookkeeping."""

from __future__ import annotations

import json
import math
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tools import flaggems_bars as fb
from workflows.models import BenchmarkResult, BenchmarkRow, Change, JobResult, JobStatus

OP = fb.MAIN_OP
MIRROR = Path("/work/.mirror/flagos-ai+FlagGems/repo")
COMMIT = "ed2508bcb"


def change(ratio: float, band: float, rounds: int = 8) -> Change:
    """A change whose interval is `band` either side of `ratio` on a log scale."""
    return Change(rounds=rounds, ratio=ratio, low=ratio / (1 + band), high=ratio * (1 + band))


def result(changes: list[Change], seconds: float = 100.0, op: str = OP) -> JobResult:
    start = datetime(2026, 12, 5, tzinfo=UTC)
    rows = [
        BenchmarkRow(dtype="float16", size=[1, 1, 8, i + 1], output_size=[4], reference_ms=0.01,
                     kernel_ms=0.1, speedup=0.1, before_kernel_ms=0.1, change=c)
        for i, c in enumerate(changes)
    ]  # fmt: skip
    return JobResult(
        status=JobStatus.succeeded, sha="a" * 40, started_at=start,
        finished_at=start + timedelta(seconds=seconds),
        benchmark=BenchmarkResult(op=op, rows=rows, compare_mode="processes"),
    )  # fmt: skip


def save(out: Path, name: str, res: JobResult | None, **meta: Any) -> None:
    """A job as the driver leaves it: NAME.json and NAME.meta.json under OUT/jobs."""
    jobs = out / "jobs"
    jobs.mkdir(parents=True, exist_ok=True)
    if res is not None:
        (jobs / f"{name}.json").write_text(res.model_dump_json())
    record = {"name": name, "op": OP, "kind": "aa", "ref": name, "source": "flaggems",
              "full": False, "warm": True, "exit": 0, "wall_s": 1.0,
              "result": f"{name}.json" if res is not None else None} | meta  # fmt: skip
    (jobs / f"{name}.meta.json").write_text(json.dumps(record))


def same(n: int = 12, band: float = 0.02) -> list[Change]:
    return [change(1.0 + (0.003 if i % 2 else -0.003), band) for i in range(n)]


def by_name(out: Path) -> dict[str, fb.Bar]:
    _, bars = fb.report(fb.load_runs([out]), 0.10)
    return {f"{b.op} {b.name}": b for b in bars}


def full_set(out: Path, aa: list[list[Change]], twice: list[Change], quarter: list[Change]) -> None:
    for i, changes in enumerate(aa, 1):
        save(out, f"fg-{OP}-aa{i}", result(changes), warm=i > 1, full=i == 2)
    save(out, f"fg-{OP}-twice", result(twice), kind="twice", exit=1)
    save(out, f"fg-{OP}-quarter", result(quarter), kind="quarter", exit=1)
    save(out, "self-fresh", result(same(4), 70.0), source="self", warm=False, full=True,
         op="adaptive_max_pool3d_backward")  # fmt: skip
    save(out, "self-warm", result(same(4), 33.0), source="self", warm=True, full=True,
         op="adaptive_max_pool3d_backward")  # fmt: skip


def test_every_bar_met_then_a_planted_aa_row_fails_it(tmp_path: Path) -> None:
    full_set(tmp_path, [same() for _ in range(5)], [change(2.0, 0.03)] * 12,
             [change(1.3, 0.03)] * 12)  # fmt: skip
    bars = by_name(tmp_path)
    assert all(b.met for b in bars.values()), [b for b in bars.values() if not b.met]
    assert bars[f"{OP} A/A: no row flagged"].measured.startswith("0 of 60 row verdicts")
    assert fb.main([str(tmp_path)]) == 0

    planted = [same() for _ in range(5)]
    planted[3][7] = change(1.2, 0.03)  # one A/A row flagged slower
    full_set(tmp_path, planted, [change(2.0, 0.03)] * 12, [change(1.3, 0.03)] * 12)
    bars = by_name(tmp_path)
    assert bars[f"{OP} A/A: no row flagged"].verdict == "FAIL"
    assert bars[f"{OP} A/A: no row flagged"].measured.startswith("1 of 60")
    assert bars[f"{OP} A/A: ≤10% too noisy"].met
    assert fb.main([str(tmp_path)]) == 1


def test_aa_too_noisy_and_order_bias(tmp_path: Path) -> None:
    noisy = [same() for _ in range(5)]
    for k in range(7):  # 7 of 60 rows (12 %) wider than the threshold
        noisy[k % 5][k] = change(1.0, 0.2)
    full_set(tmp_path, noisy, [change(2.0, 0.03)] * 12, [change(1.3, 0.03)] * 12)
    assert by_name(tmp_path)[f"{OP} A/A: ≤10% too noisy"].verdict == "FAIL"
    biased = [[change(1.025, 0.02)] * 12 for _ in range(5)]  # within the threshold, +2.5 %
    full_set(tmp_path, biased, [change(2.0, 0.03)] * 12, [change(1.3, 0.03)] * 12)
    bars = by_name(tmp_path)
    assert bars[f"{OP} A/A: no row flagged"].met
    assert bars[f"{OP} A/A: median after/before within ±2%"].verdict == "FAIL"


def test_twice_with_94_percent_flagged_fails_power(tmp_path: Path) -> None:
    aa = [same(50) for _ in range(5)]
    twice = [change(2.0, 0.03)] * 47 + [change(2.0, 0.3)] * 3  # 94 %: three too noisy
    full_set(tmp_path, aa, twice, [change(1.3, 0.03)] * 50)
    bars = by_name(tmp_path)
    assert bars[f"{OP} twice: ≥95% of rows slower"].verdict == "FAIL"
    assert bars[f"{OP} twice: ≥95% of rows slower"].measured.startswith("47 of 50 (94%)")
    assert bars[f"{OP} twice: the gate fails"].met  # a slower row fails the gate all the same
    twice = [change(2.0, 0.03)] * 48 + [change(2.0, 0.3)] * 2  # 96 %
    full_set(tmp_path, aa, twice, [change(1.3, 0.03)] * 50)
    assert by_name(tmp_path)[f"{OP} twice: ≥95% of rows slower"].met


def test_twice_gate_must_fail_and_quarter_misses(tmp_path: Path) -> None:
    aa = [same() for _ in range(5)]
    # Every twice row within the threshold: nothing slower, the gate passes: both bars fail.
    quarter = [change(1.3, 0.03)] * 11 + [change(1.08, 0.03)]  # one judgeable row missed
    full_set(tmp_path, aa, [change(1.05, 0.02)] * 12, quarter)
    bars = by_name(tmp_path)
    assert bars[f"{OP} twice: ≥95% of rows slower"].verdict == "FAIL"
    assert bars[f"{OP} twice: the gate fails"].verdict == "FAIL"
    assert bars[f"{OP} quarter: every row with a band under ±10% slower"].verdict == "FAIL"
    # A too noisy row is not judgeable: the rest all slower meets the quarter bar.
    quarter = [change(1.3, 0.03)] * 11 + [change(1.3, 0.25)]
    full_set(tmp_path, aa, [change(2.0, 0.03)] * 12, quarter)
    bar = by_name(tmp_path)[f"{OP} quarter: every row with a band under ±10% slower"]
    assert bar.met and bar.measured.startswith("11 of 11; 1 too noisy")


def test_smallest_detectable_change_from_the_band(tmp_path: Path) -> None:
    band = math.sqrt(1.02 / 0.98) - 1  # low 0.98, high 1.02: ±2.02 %
    rows = [Change(rounds=8, ratio=1.0, low=0.98, high=1.02)]
    for i in range(1, 4):
        save(tmp_path, f"fg-{OP}-aa{i}", result(rows))
    text, _ = fb.report(fb.load_runs([tmp_path]), 0.10)
    expected = (1.10 * (1 + band) - 1) * 100  # the threshold plus the band: +12.2 %
    line = next(line for line in text.splitlines() if "float16 1,1,8,1→4:" in line)
    assert f"±{band * 100:.1f} %" in line and f"+{expected:.1f} %" in line
    assert f"+{expected:.1f} %" == "+12.2 %"
    # A row wider than the threshold can detect nothing.
    save(tmp_path, f"fg-{OP}-aa1", result([change(1.0, 0.15)]))
    save(tmp_path, f"fg-{OP}-aa2", result([change(1.0, 0.15)]))
    save(tmp_path, f"fg-{OP}-aa3", result([change(1.0, 0.15)]))
    text, _ = fb.report(fb.load_runs([tmp_path]), 0.10)
    assert "float16 1,1,8,1→4: ±15.0 % · none" in text


def test_cost_bars_and_missing_data(tmp_path: Path) -> None:
    save(tmp_path, f"fg-{OP}-aa1", result(same(), 200.0), warm=False)  # fresh: not judged
    save(tmp_path, f"fg-{OP}-aa2", result(same(), 140.0), full=True)
    bars = by_name(tmp_path)
    fg_cost = bars["flaggems cost: warm FlagGems job to verdict ≤150 s"]
    assert fg_cost.met and "max 140.0 s" in fg_cost.measured and "fresh" in fg_cost.measured
    assert bars["self cost: this repository's warm job to verdict ≤45 s"].verdict == "MISSING"
    assert bars[f"{OP} twice"].verdict == "MISSING"
    assert bars[f"{OP} quarter"].verdict == "MISSING"
    save(tmp_path, f"fg-{OP}-aa3", result(same(), 151.0))
    save(tmp_path, "self-warm", result(same(4), 46.0), source="self")
    bars = by_name(tmp_path)
    assert bars["flaggems cost: warm FlagGems job to verdict ≤150 s"].verdict == "FAIL"
    assert bars["self cost: this repository's warm job to verdict ≤45 s"].verdict == "FAIL"


def test_a_fast_job_that_judged_nothing_or_one_killed_past_the_limit_fails_the_cost(
    tmp_path: Path,
) -> None:
    """On the H100 a full job's rounds stopped at one (the pricing since fixed): its 112 s
    "verdict" judged no row, and the reader had called the cost bar met."""
    save(tmp_path, f"fg-{OP}-aa1", result(same(), 120.0))
    assert by_name(tmp_path)["flaggems cost: warm FlagGems job to verdict ≤150 s"].met
    short = [change(1.0, 0.02, rounds=1)] * 12
    save(tmp_path, f"fg-{OP}-aa2", result(short, 112.0), full=True)
    cost = by_name(tmp_path)["flaggems cost: warm FlagGems job to verdict ≤150 s"]
    assert cost.verdict == "FAIL" and f"no verdict: fg-{OP}-aa2" in cost.measured
    save(tmp_path, f"fg-{OP}-aa2", result(same(), 140.0), full=True)
    save(tmp_path, f"fg-{OP}-aa3", None, exit=124, wall_s=175.7)  # the call's deadline
    cost = by_name(tmp_path)["flaggems cost: warm FlagGems job to verdict ≤150 s"]
    assert cost.verdict == "FAIL" and "no verdict after 175.7 s" in cost.measured
    save(tmp_path, f"fg-{OP}-aa3", None, exit=124, wall_s=40.0)  # killed early: says nothing
    assert by_name(tmp_path)["flaggems cost: warm FlagGems job to verdict ≤150 s"].met


def test_a_job_without_result_and_later_directories(tmp_path: Path) -> None:
    first, second = tmp_path / "call1", tmp_path / "call2"
    save(first, f"fg-{OP}-twice", None, kind="twice", exit=124)
    bars = by_name(first)
    assert bars[f"{OP} twice"].verdict == "MISSING"
    assert "exit 124" in bars[f"{OP} twice"].measured
    save(second, f"fg-{OP}-twice", result([change(2.0, 0.03)] * 12), kind="twice", exit=1)
    _, bars_list = fb.report(fb.load_runs([first, second]), 0.10)
    got = {f"{b.op} {b.name}": b for b in bars_list}
    assert got[f"{OP} twice: ≥95% of rows slower"].met
    assert got[f"{OP} twice: the gate fails"].met
    other = result([change(2.0, 0.03)] * 5, op="exp")
    save(second, "fg-exp-twice", other, op="exp", kind="twice", exit=1)
    out = tmp_path / "bars.json"
    assert fb.main([str(first), str(second), "--json", str(out)]) == 1  # A/A missing
    verdicts = {(b["op"], b["name"]): b["verdict"] for b in json.loads(out.read_text())}
    assert verdicts[("exp", "twice: ≥95% of rows slower")] == "PASS"
    assert verdicts[("exp", "A/A")] == "MISSING"
    assert ("exp", "quarter") not in verdicts  # asked of the main operator only


# --- the patchers --------------------------------------------------------------------------

SMALL = '''# Copyright line
"""A module."""

CALLS = []


def op(x, scale=1):
    # the body: one call
    CALLS.append(x)
    return x * scale  # the result


def other(x):
    return "# not a comment"
'''


def load(text: str) -> dict[str, Any]:
    namespace: dict[str, Any] = {}
    exec(compile(text, "patched", "exec"), namespace)
    return namespace


def test_comment_edit_changes_one_different_comment_each_time() -> None:
    edits = [fb.comment_edit(SMALL, i) for i in (1, 2, 3)]
    assert len(set(edits)) == 3
    assert "the result (ondemand bars: A/A 1)" in edits[0]
    assert "# the body: one call (ondemand bars: A/A 2)" in edits[1]
    assert "# Copyright line (ondemand bars: A/A 3)" in edits[2]
    for edited in edits:
        changed = [
            a for a, b in zip(SMALL.splitlines(), edited.splitlines(), strict=True) if a != b
        ]
        assert len(changed) == 1 and "not a comment" not in changed[0]
        assert load(edited)["op"](3) == 3
    with pytest.raises(fb.PatchError, match="3 comments"):
        fb.comment_edit(SMALL, 4)


def test_twice_edit_calls_the_body_twice_and_returns_the_second() -> None:
    ns = load(fb.twice_edit(SMALL, "op"))
    assert ns["op"](2, scale=5) == 10
    assert ns["CALLS"] == [2, 2]
    with pytest.raises(fb.PatchError, match="already patched"):
        fb.twice_edit(fb.twice_edit(SMALL, "op"), "op")
    with pytest.raises(fb.PatchError, match="no top-level `def missing"):
        fb.twice_edit(SMALL, "missing")
    nested = "class K:\n    def op(self):\n        return 1\n"
    with pytest.raises(fb.PatchError):
        fb.twice_edit(nested, "op")


class FakeTensor:
    """Just what the quarter edit touches: contiguity, a flat view, slicing, numel, mul_."""

    def __init__(self, n: int, log: list[tuple[str, Any]]) -> None:
        self.n, self.log = n, log

    def is_contiguous(self) -> bool:
        return True

    def view(self, *shape: int) -> FakeTensor:
        self.log.append(("view", shape))
        return self

    def numel(self) -> int:
        return self.n

    def __getitem__(self, key: slice) -> FakeTensor:
        self.log.append(("slice", key.stop))
        return FakeTensor(key.stop, self.log)

    def mul_(self, value: int) -> FakeTensor:
        self.log.append(("mul_", (self.n, value)))
        return self


def test_quarter_edit_passes_over_the_first_quarter_and_keeps_the_result() -> None:
    source = "def op(x):\n    return x\n\n\ndef pair(x):\n    return (x, 7)\n"
    ns = load(fb.quarter_edit(fb.quarter_edit(source, "op").replace("_exact_op", "_e"), "pair"))
    log: list[tuple[str, Any]] = []
    tensor = FakeTensor(100, log)
    assert ns["op"](tensor) is tensor
    assert log == [("view", (-1,)), ("slice", 25), ("mul_", (25, 1))]
    log.clear()
    assert ns["pair"](FakeTensor(3, log))[1] == 7  # a tuple: its first tensor, at least 1
    assert log[-1] == ("mul_", (1, 1))
    with pytest.raises(fb.PatchError):
        fb.quarter_edit(source, "absent")


def test_patch_cli_fails_loudly_and_leaves_the_file(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text(SMALL)
    assert fb.main(["patch", "twice", str(path), "--func", "gone"]) == 2
    assert path.read_text() == SMALL
    assert fb.main(["patch", "comment", str(path), "--func", "op", "--index", "2"]) == 0
    assert "(ondemand bars: A/A 2)" in path.read_text()


def snapshot(path: str) -> str:
    if not MIRROR.is_dir():
        pytest.skip("no FlagGems snapshot here")
    done = subprocess.run(["git", "-C", str(MIRROR), "show", f"{COMMIT}:{path}"],
                          capture_output=True, text=True)  # fmt: skip
    if done.returncode:
        pytest.skip(f"{path} not in the snapshot")
    return done.stdout


@pytest.mark.parametrize("op", [OP, *fb.OTHER_OPS])
def test_patches_apply_to_flaggems_own_files(op: str) -> None:
    text = snapshot(fb.op_path(op))
    edits = {fb.comment_edit(text, i) for i in range(1, 6)}
    assert len(edits) == 5  # five pull requests, five different comments
    for kind in (fb.twice_edit, fb.quarter_edit):
        compile(kind(text, op), op, "exec")


# --- workflows and the driver's bookkeeping ---------------------------------------------------


def test_workflow_copies(tmp_path: Path) -> None:
    import yaml

    from workflows.spec import Compare

    full, bench = tmp_path / "full", tmp_path / "bench"
    set_workers = fb.write_workflows(Path("workflows"), full, bench, "auto")
    assert set_workers == ("workers" in Compare.model_fields)
    doc = yaml.safe_load((bench / "nvidia.yaml").read_text())
    assert doc["python_env"]["extras"] == []
    assert [s["kind"] for s in doc["layouts"]["flaggems"]] == ["benchmark"]
    assert all(s.get("kind") != "accuracy" for s in doc["steps"])
    doc = yaml.safe_load((full / "nvidia.yaml").read_text())
    assert [s["kind"] for s in doc["layouts"]["flaggems"]] == ["accuracy", "benchmark"]
    if not set_workers:
        with pytest.raises(SystemExit, match="no such field"):
            fb.write_workflows(Path("workflows"), full, bench, "on")


def test_driver_deadline_skip_and_meta(tmp_path: Path) -> None:
    calls: list[list[str]] = []

    def fake_run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[bytes]:
        calls.append(argv)
        Path(argv[argv.index("--json") + 1]).write_text(result(same()).model_dump_json())
        return subprocess.CompletedProcess(argv, 1, b"# report\n", b"log line\n")

    driver = fb.Driver(tmp_path, fb.Deadline(1000.0), job_s=100.0, skip=("*-aa3",), run=fake_run)
    job = fb.Job(f"fg-{OP}-aa1", OP, "aa", f"{OP}-aa1", tmp_path, tmp_path / "wf", False,
                 "flaggems", ("--wheelhouse", "W"))  # fmt: skip
    first = driver.job(job)
    second = driver.job(fb.Job(**{**job.__dict__, "name": f"fg-{OP}-aa2"}))
    assert first is not None and second is not None
    assert not first["warm"] and second["warm"] and first["exit"] == 1
    argv = calls[0]
    assert argv[3:5] == ["run", f"{OP}:nvidia"] and argv[-2:] == ["--wheelhouse", "W"]
    assert argv[argv.index("--ref") + 1] == f"{OP}-aa1" and "--base" in argv
    assert driver.job(fb.Job(**{**job.__dict__, "name": f"fg-{OP}-aa3"})) is None
    assert len(calls) == 2
    late = fb.Driver(tmp_path, fb.Deadline(50.0), job_s=100.0, run=fake_run)
    assert late.job(fb.Job(**{**job.__dict__, "name": f"fg-{OP}-aa4"})) is None  # 50 < 100 s
    late = fb.Driver(tmp_path, fb.Deadline(150.0), seen={("flaggems", False): 200.0}, run=fake_run)
    assert late.job(fb.Job(**{**job.__dict__, "name": f"fg-{OP}-aa4"})) is None  # the longest
    assert len(calls) == 2
    runs = fb.load_runs([tmp_path])
    assert sorted(r.name for r in runs) == [f"fg-{OP}-aa1", f"fg-{OP}-aa2"]
    assert (tmp_path / "jobs" / f"fg-{OP}-aa1.stderr.txt").read_text() == "log line\n"


def test_checkout_and_branches(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "src").mkdir(parents=True)
    (tree / "src" / "op.py").write_text(SMALL)
    (tree / ".device").mkdir()
    (tree / ".device" / "big").write_text("not copied")
    repo = tmp_path / "repo"
    fb.init_checkout(repo, files=tree)
    assert not (repo / ".device").exists()
    assert (repo / ".github" / "ondemand.yml").read_text() == "compare:\n  gate: fail\n"
    fb.make_branch(repo, "aa1", "src/op.py", "comment", "op", 1)
    fb.make_branch(repo, "twice", "src/op.py", "twice", "op")
    with pytest.raises(fb.PatchError):
        fb.make_branch(repo, "bad", "src/op.py", "twice", "gone")
    assert fb.git(repo, "branch", "--show-current").strip() == "main"
    assert (repo / "src" / "op.py").read_text() == SMALL
    diff = fb.git(repo, "diff", "main", "aa1", "--stat")
    assert "1 file changed, 1 insertion(+), 1 deletion(-)" in diff
    assert "_ondemand_once_op" in fb.git(repo, "show", "twice:src/op.py")


def test_drive_makes_every_pull_request_and_runs_the_steps_in_order(tmp_path: Path) -> None:
    import tarfile

    tree = tmp_path / "fg"
    for op in (OP, *fb.OTHER_OPS):
        path = tree / fb.op_path(op)
        path.parent.mkdir(parents=True, exist_ok=True)
        comments = "".join(f"# comment {i}\n" for i in range(6))
        path.write_text(f"{comments}\n\ndef {op}(x):\n    return x  # the result\n")
    tarball = tmp_path / "fg.tar.xz"
    with tarfile.open(tarball, "w:xz") as tar:
        tar.add(tree, arcname=".")
    own = tmp_path / "own"
    own_file = own / "kernels" / "ops" / OP / "__init__.py"
    own_file.parent.mkdir(parents=True)
    own_file.write_text("def f():\n    return 1  # one\n")
    seen: list[tuple[str, str, str]] = []

    def fake_run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[bytes]:
        repo, ref = Path(argv[argv.index("--repo") + 1]), argv[argv.index("--ref") + 1]
        seen.append((argv[4], ref, Path(argv[argv.index("--workflows") + 1]).name))
        fb.git(repo, "rev-parse", "--verify", ref)  # the pull request exists
        Path(argv[argv.index("--json") + 1]).write_text(result(same()).model_dump_json())
        return subprocess.CompletedProcess(argv, 0, b"", b"")

    args = fb.drive_parser().parse_args(
        ["--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"),
         "--tarball", str(tarball), "--self-repo", str(own), "--aa", "3", "--other-aa", "2",
         "--skip", f"fg-{OP}-aa3", "--steps", "aa power others cost"]
    )  # fmt: skip
    assert fb.drive(args, run=fake_run) == 0
    assert seen == [
        (f"{OP}:nvidia", f"{OP}-aa1", "wf-bench"),
        (f"{OP}:nvidia", f"{OP}-aa2", "wf-full"),  # the warm full job: the cost bar
        (f"{OP}:nvidia", f"{OP}-twice", "wf-bench"),
        (f"{OP}:nvidia", f"{OP}-quarter", "wf-bench"),
        ("exp:nvidia", "exp-aa1", "wf-bench"),
        ("exp:nvidia", "exp-twice", "wf-bench"),
        ("vdot:nvidia", "vdot-aa1", "wf-bench"),
        ("vdot:nvidia", "vdot-twice", "wf-bench"),
        ("exp:nvidia", "exp-aa2", "wf-bench"),
        ("vdot:nvidia", "vdot-aa2", "wf-bench"),
        (f"{OP}:nvidia", "aa1", "wf-full"),
        (f"{OP}:nvidia", "aa1", "wf-full"),
    ]
    fg = tmp_path / "work" / "flaggems"
    assert "(ondemand bars: A/A 2)" in fb.git(fg, "show", f"{OP}-aa2:{fb.op_path(OP)}")
    assert "_ondemand_exact_" in fb.git(fg, "show", f"{OP}-quarter:{fb.op_path(OP)}")
    assert "compare:\n  gate: fail" in fb.git(fg, "show", "main:.github/ondemand.yml")
    runs = {r.name: r.meta for r in fb.load_runs([tmp_path / "out"])}
    assert runs["self-warm"]["warm"] and not runs["self-fresh"]["warm"]
    assert not runs[f"fg-{OP}-aa1"]["warm"] and runs[f"fg-{OP}-aa2"]["full"]
    assert runs["fg-exp-aa2"]["kind"] == "aa" and runs["fg-vdot-twice"]["kind"] == "twice"

    # --full-first: a short call's only A/A job, on the fresh runner, runs accuracy too.
    seen.clear()
    args = fb.drive_parser().parse_args(
        ["--out", str(tmp_path / "out2"), "--work", str(tmp_path / "work"), "--tarball",
         str(tarball), "--self-repo", str(own), "--aa", "2", "--steps", "aa", "--full-first"]
    )  # fmt: skip
    assert fb.drive(args, run=fake_run) == 0
    assert seen == [
        (f"{OP}:nvidia", f"{OP}-aa1", "wf-full"),
        (f"{OP}:nvidia", f"{OP}-aa2", "wf-bench"),  # one full job a call
    ]
    runs = {r.name: r.meta for r in fb.load_runs([tmp_path / "out2"])}
    assert runs[f"fg-{OP}-aa1"]["full"] and not runs[f"fg-{OP}-aa1"]["warm"]


# --- the host step --------------------------------------------------------------------------


def test_host_edit_spends_its_python_before_each_call_and_keeps_the_result() -> None:
    import time

    ns = load(fb.host_edit(SMALL, "op", us=3000.0))
    started = time.perf_counter()
    assert ns["op"](2, scale=5) == 10
    assert time.perf_counter() - started >= 0.003
    assert ns["CALLS"] == [2]
    with pytest.raises(fb.PatchError, match="already patched"):
        fb.host_edit(fb.host_edit(SMALL, "op"), "op")
    with pytest.raises(fb.PatchError, match="no top-level `def missing"):
        fb.host_edit(SMALL, "missing")


def host_result(host: list[Change], seconds: float = 100.0, exit_gate: bool = False) -> JobResult:
    """A FlagGems gelu job: rows host-bound (host 150 µs a call, device 5 µs) with `host` their
    host changes over three processes a side, the device steady."""
    res = result(same(len(host)), seconds, op=fb.HOST_OP)
    assert res.benchmark is not None
    rows = [
        row.model_copy(update={
            "kernel_ms": 0.005, "before_kernel_ms": 0.005, "kernel_host_us": 150.0 * h.ratio,
            "before_kernel_host_us": 150.0, "host_process_change": h,
            "kernel_host_process_us": [150.0 * h.ratio * f for f in (0.98, 1.0, 1.02)],
            "before_kernel_host_process_us": [150.0 * f for f in (0.98, 1.0, 1.02)],
        })
        for row, h in zip(res.benchmark.rows, host, strict=True)
    ]  # fmt: skip
    return res.model_copy(update={"benchmark": res.benchmark.model_copy(update={"rows": rows})})


def test_the_host_steps_bars(tmp_path: Path) -> None:
    """Three A/A pull requests of gelu flag no host row, and the host pull request's host-bound
    rows are all flagged slower on host time with the gate failing: every bar of a host-only
    call met (none missing of the other steps), each row's host band, smallest detectable
    host slowdown and process spread printed; one host-bound row too noisy fails the bar."""
    for i in (1, 2, 3):
        save(tmp_path, f"fg-{fb.HOST_OP}-aa{i}", host_result([change(1.0, 0.03)] * 9),
             op=fb.HOST_OP, warm=i > 1)  # fmt: skip
    save(tmp_path, f"fg-{fb.HOST_OP}-host", host_result([change(1.2, 0.03)] * 9),
         op=fb.HOST_OP, kind="host", exit=1)  # fmt: skip
    text, bars_list = fb.report(fb.load_runs([tmp_path]), 0.10)
    bars = {f"{b.op} {b.name}": b for b in bars_list}
    assert all(b.met for b in bars_list), [b for b in bars_list if not b.met]
    assert bars[f"{fb.HOST_OP} A/A: no host row flagged"].measured.startswith("0 of 27")
    host = bars[f"{fb.HOST_OP} host: every host-bound row slower on host time"]
    assert host.measured.startswith("9 of 9 host-bound rows (+20.0 %")
    assert bars[f"{fb.HOST_OP} host: the gate fails"].measured == "failure (exit 1)"
    assert not [b for b in bars_list if b.op in (OP, "self")]  # a host-only call
    assert "host: host band ±3.0 % · +13.3 % · process spread 2.0 % · host +20.0 % slower" in text
    noisy = [change(1.2, 0.03)] * 8 + [change(1.2, 0.3)]
    save(tmp_path, f"fg-{fb.HOST_OP}-host", host_result(noisy), op=fb.HOST_OP, kind="host",
         exit=1)  # fmt: skip
    again = by_name(tmp_path)
    host = again[f"{fb.HOST_OP} host: every host-bound row slower on host time"]
    assert not host.met and "8 of 9" in host.measured and "1 host too noisy" in host.measured


def test_drive_runs_the_host_step(tmp_path: Path) -> None:
    """The host step: three comment-only pull requests and the host one of gelu (the first
    on the fresh runner, the last A/A a full job with --full-warm), the workflow copies with
    the host processes asked for."""
    import tarfile

    import yaml

    tree = tmp_path / "fg"
    path = tree / fb.op_path(fb.HOST_OP)
    path.parent.mkdir(parents=True)
    comments = "".join(f"# comment {i}\n" for i in range(4))
    path.write_text(f"{comments}\n\ndef gelu(x):\n    return x  # the result\n")
    tarball = tmp_path / "fg.tar.xz"
    with tarfile.open(tarball, "w:xz") as tar:
        tar.add(tree, arcname=".")
    seen: list[tuple[str, str]] = []

    def fake_run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[bytes]:
        ref = argv[argv.index("--ref") + 1]
        seen.append((ref, Path(argv[argv.index("--workflows") + 1]).name))
        Path(argv[argv.index("--json") + 1]).write_text(result(same()).model_dump_json())
        return subprocess.CompletedProcess(argv, 0, b"", b"")

    args = fb.drive_parser().parse_args(
        ["--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"), "--tarball",
         str(tarball), "--steps", "host", "--full-warm", "--host-processes", "5",
         "--host-us", "40"]
    )  # fmt: skip
    assert fb.drive(args, run=fake_run) == 0
    assert seen == [("gelu-aa1", "wf-bench"), ("gelu-host", "wf-bench"),
                    ("gelu-aa2", "wf-bench"), ("gelu-aa3", "wf-full")]  # fmt: skip
    fg = tmp_path / "work" / "flaggems"
    patched = fb.git(fg, "show", f"gelu-host:{fb.op_path(fb.HOST_OP)}")
    assert "_ondemand_host_gelu = gelu" in patched and "4e-05" in patched
    doc = yaml.safe_load((tmp_path / "work" / "wf-bench" / "nvidia.yaml").read_text())
    (bench,) = [s for s in doc["layouts"]["flaggems"] if s["kind"] == "benchmark"]
    assert bench["compare"]["host_processes"] == 5
    runs = {r.name: r.meta for r in fb.load_runs([tmp_path / "out"])}
    assert runs["fg-gelu-host"]["kind"] == "host" and runs["fg-gelu-aa3"]["full"]


def test_the_host_steps_patches_apply_to_flaggems_gelu() -> None:
    text = snapshot(fb.op_path(fb.HOST_OP))
    assert len({fb.comment_edit(text, i) for i in range(1, 4)}) == 3
    compile(fb.host_edit(text, fb.HOST_OP), fb.HOST_OP, "exec")


def test_drive_runs_the_main_step_each_push_on_the_one_before(tmp_path: Path) -> None:
    """The main step: two comment-only pushes on the branch standing for main, each job's
    `--ref` the push and `--base` the commit before it (the first push's base is main); the
    reader's main A/A bars pass on quiet rows and fail on one flagged row."""
    import tarfile

    tree = tmp_path / "fg"
    path = tree / fb.op_path(fb.HOST_OP)
    path.parent.mkdir(parents=True)
    path.write_text("# one\n# two\n\n\ndef gelu(x):\n    return x  # the result\n")
    tarball = tmp_path / "fg.tar.xz"
    with tarfile.open(tarball, "w:xz") as tar:
        tar.add(tree, arcname=".")
    seen: list[tuple[str, str]] = []
    out = tmp_path / "out"

    def fake_run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[bytes]:
        seen.append((argv[argv.index("--ref") + 1], argv[argv.index("--base") + 1]))
        Path(argv[argv.index("--json") + 1]).write_text(
            result(same(), op=fb.HOST_OP).model_dump_json())
        return subprocess.CompletedProcess(argv, 0, b"", b"")

    args = fb.drive_parser().parse_args(
        ["--out", str(out), "--work", str(tmp_path / "work"), "--tarball", str(tarball),
         "--steps", "main", "--main-aa", "2"]
    )  # fmt: skip
    assert fb.drive(args, run=fake_run) == 0
    assert seen == [("trunk~1", "trunk~2"), ("trunk~0", "trunk~1")]
    fg = tmp_path / "work" / "flaggems"
    assert fb.git(fg, "rev-parse", "trunk~2") == fb.git(fg, "rev-parse", "main")
    pushed = fb.git(fg, "show", f"trunk:{fb.op_path(fb.HOST_OP)}")
    assert pushed.count("A/A") == 2 and "return x  # the result" in pushed
    bars = {b.name: b for b in fb.report(fb.load_runs([out]), 0.10)[1] if b.op == fb.HOST_OP}
    assert bars["main A/A: no row flagged"].met, bars
    assert "(2 default-branch runs)" in bars["main A/A: no row flagged"].measured
    assert "A/A" not in bars  # no pull request ran: nothing missing of them
    save(out, f"fg-{fb.HOST_OP}-main2", result([change(1.3, 0.02), *same(11)], op=fb.HOST_OP),
         op=fb.HOST_OP, kind="main")  # fmt: skip
    again = {b.name: b for b in fb.report(fb.load_runs([out]), 0.10)[1] if b.op == fb.HOST_OP}
    assert not again["main A/A: no row flagged"].met
