"""`ondemand run OP:BACKEND` end to end: the real CLI as a subprocess on the tiny repository.
One run keeps the compile cache and builds its trusted commit after the verdict; the others
keep none, so that build (a second run of the workflow) is not repeated for each."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.local import UsageError, parse_target
from tests.runner.tinyrepo import TinyRepo
from workflows.models import JobResult, JobStatus
from workflows.spec import backend_names, load_workflows

ROOT = Path(__file__).resolve().parents[2]


def ondemand(
    *args: str, cache: Path, cwd: Path | None = None, compile_cache: bool = False
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    keep = () if compile_cache else ("--no-compile-cache",)
    return subprocess.run(
        [sys.executable, "-m", "ondemand", "run", *args, *keep],
        cwd=cwd or ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_passing_op_prints_the_report_and_exits_0(
    tiny_repo: TinyRepo, runner_cache: Path, tmp_path: Path
) -> None:
    out = tmp_path / "result.json"
    proc = ondemand(
        "good_op:interpreter",  # an alias of cpu
        "--repo",
        str(tiny_repo.path),
        "--ref",
        "pr",
        "--base",
        "main",
        "--json",
        str(out),
        cache=runner_cache,
        compile_cache=True,
    )
    assert proc.returncode == 0, proc.stderr
    report = proc.stdout
    assert "<!-- ondemand:good_op:cpu -->" in report
    assert "3 passed" in report and "2 skipped" in report
    assert tiny_repo.head_sha[:7] in report
    # The interpreter's timings are labelled, and shown as latencies without speedups.
    assert "Kernel Latency" in report and "Speedup" not in report
    assert "not performance" in report
    result = JobResult.model_validate_json(out.read_text())
    assert result.status is JobStatus.succeeded
    assert result.benchmark is not None
    assert result.benchmark.rows[0].before_speedup == pytest.approx(1.5)
    assert "step accuracy" in proc.stderr  # the job log is echoed unless --quiet
    # After the verdict, the base (the only run here keeping the compile cache) is built.
    assert f"trusted build of {tiny_repo.base_sha[:10]}" in proc.stderr
    assert "trusted build: succeeded" in proc.stderr
    # --json writes the wire format, as the runner reports it to the service.
    data = json.loads(out.read_text())
    assert data["status"] == "succeeded" and data["accuracy"]["passed"] == 3


def test_failing_op_exits_1_from_the_current_checkout(
    tiny_repo: TinyRepo, runner_cache: Path
) -> None:
    # Default repo: the current directory; default ref: HEAD (main, the base commit). Judged
    # by main's settings, which re-run no failing test.
    proc = ondemand(
        "bad_op:cpu", "--base", "main", "--no-bench", "-q", cache=runner_cache,
        cwd=tiny_repo.path,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    assert "test_bad_value" in proc.stdout
    assert tiny_repo.base_sha[:7] in proc.stdout
    assert proc.stderr == ""


def test_unknown_op_and_usage_errors(tiny_repo: TinyRepo, runner_cache: Path) -> None:
    proc = ondemand("good_opx:cpu", "-q", "--repo", str(tiny_repo.path), cache=runner_cache)
    assert proc.returncode == 1
    assert "good_op" in proc.stdout
    bad = ondemand("good_op:tpu", "--repo", str(tiny_repo.path), cache=runner_cache)
    assert bad.returncode == 2 and "unknown backend 'tpu'" in bad.stderr
    ref = ondemand(
        "good_op:cpu", "--repo", str(tiny_repo.path), "--ref", "nope", cache=runner_cache
    )
    assert ref.returncode == 2 and "'nope' is not a commit" in ref.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("add:cpu", ("add", "cpu")),
        (" add : CUDA ", ("add", "nvidia")),
        ("adaptive_max_pool3d_backward:musa", ("adaptive_max_pool3d_backward", "mthreads")),
    ],
)
def test_parse_target(text: str, expected: tuple[str, str]) -> None:
    assert parse_target(text, backend_names(load_workflows())) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("add", "expected OP:BACKEND"),
        ("|add:cpu", "not an operator name"),
        ("add;rm -rf /:cpu", "not an operator name"),
        ("add:tpu", "unknown backend"),
    ],
)
def test_parse_target_errors(text: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_target(text, backend_names(load_workflows()))


def test_a_requirement_only_the_runner_sees_errors_the_environment_step(
    tiny_repo: TinyRepo, runner_cache: Path, tmp_path: Path
) -> None:
    """A distribution on the runner's PYTHONPATH is not in the job's environment: the job
    errors in `environment`, naming it and where the runner saw it, not later in a test."""
    only_here = tmp_path / "runner-path"
    info = only_here / "ondemand_pathonly-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ondemand-pathonly\nVersion: 1.0\n")
    (only_here / "ondemand_pathonly.py").write_text("VALUE = 1\n")
    repo = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", str(tiny_repo.path), str(repo)], check=True)
    pyproject = repo / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace("dependencies = []", 'dependencies = ["ondemand-pathonly"]')
    )
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "commit", "-qam", "needs a package"], check=True)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    env = {**os.environ, "XDG_CACHE_HOME": str(runner_cache), "PYTHONPATH": str(only_here)}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "ondemand", "run", "good_op:cpu", "--repo", str(repo),
         "--no-bench", "-q", "--wheelhouse", str(wheels), "--json", str(tmp_path / "r.json"),
         "--no-compile-cache"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    took = time.monotonic() - started
    result = JobResult.model_validate_json((tmp_path / "r.json").read_text())
    assert result.status is JobStatus.errored, proc.stdout
    assert result.error_step == "environment"
    message = result.error_message or ""
    assert "ondemand-pathonly" in message and str(only_here) in message and "PYTHONPATH" in message
    assert proc.returncode != 0 and took < 60, took


def test_changed_runs_the_operators_the_commit_changes(
    tiny_repo: TinyRepo, runner_cache: Path, tmp_path: Path
) -> None:
    """`changed:BACKEND --base B`: good_op's own file changed and one of bad_op's tests did,
    so both run (bad_op fails, of a test already failing on the base: exit 0), not loud_op
    beside them in the test file; a commit touching no operator runs none."""
    repo = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", str(tiny_repo.path), str(repo)], check=True)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com"]

    def commit(message: str, files: dict[str, str]) -> None:
        for name, text in files.items():
            (repo / name).parent.mkdir(parents=True, exist_ok=True)
            (repo / name).write_text(text)
        subprocess.run([*git, "add", "-A"], check=True)
        subprocess.run([*git, "commit", "-qm", message], check=True)

    subprocess.run([*git, "checkout", "-q", "-b", "base", "origin/main"], check=True)
    own = {f"kernels/ops/{op}/__init__.py": f"def {op}():\n    return 1\n" for op in (
        "good_op", "bad_op", "loud_op")}  # fmt: skip
    # The base's settings: one re-run each way, enough to tell a failure is already failing.
    own[".github/ondemand.yml"] = "failures:\n  reruns: 1\n"
    commit("the operators' own files", own)
    subprocess.run([*git, "checkout", "-q", "-b", "ops"], check=True)
    tests = (repo / "tests" / "kernels" / "test_ops.py").read_text()
    commit("good_op's kernel, a bad_op test", {
        "kernels/ops/good_op/__init__.py": "def good_op():\n    return 2\n",
        "tests/kernels/test_ops.py": tests.replace(
            "def test_bad_fine():\n    pass", "def test_bad_fine():\n    assert True"),
    })  # fmt: skip
    proc = ondemand(
        "changed:cpu", "--repo", str(repo), "--ref", "ops", "--base", "base",
        "--no-bench", "-q", cache=runner_cache,
    )  # fmt: skip
    # bad_op's failing test fails on the merge base too: the default gate lets it pass.
    assert proc.returncode == 0, proc.stderr
    assert "1 already failing on base · 1 failed, 1 passed" in proc.stdout
    assert "changed: 2 operators" in proc.stderr
    assert "good_op: kernels/ops/good_op/__init__.py: its own file" in proc.stderr
    assert "bad_op: tests/kernels/test_ops.py: its tests changed" in proc.stderr
    assert "<!-- ondemand:good_op:cpu -->" in proc.stdout
    assert "<!-- ondemand:bad_op:cpu -->" in proc.stdout
    assert "loud_op" not in proc.stdout  # its tests are in the same file, untouched

    subprocess.run([*git, "checkout", "-q", "-b", "docs", "base"], check=True)
    commit("notes", {"NOTES.md": "notes\n"})
    none = ondemand(
        "changed:cpu", "--repo", str(repo), "--ref", "docs", "--base", "base", "-q",
        cache=runner_cache,
    )  # fmt: skip
    assert none.returncode == 0 and "changed: no operator changed" in none.stderr
    assert none.stdout == ""
    usage = ondemand("changed:cpu", "--repo", str(repo), "-q", cache=runner_cache)
    assert usage.returncode == 2 and "needs --base" in usage.stderr
