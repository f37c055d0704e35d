"""A FlagGems-style repository, detected from its checkout and run with the workflow's
`layouts.flaggems` steps: accuracy from tests/ by marker, benchmark records from
benchmark/test_<op>.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.environment.pyenv import PackageSources
from runner.job.execute import execute
from runner.job.layouts import FLAGGEMS, detect, size_of
from tests.runner.jobs import job_context
from tests.runner.test_pyenv import _wheel
from workflows.models import JobResult, JobSpec, JobStatus
from workflows.spec import load_workflows

CONFTEST = """
def pytest_addoption(parser):
    parser.addoption("--level", default="comprehensive")
    parser.addoption("--record", default="none")
"""

RECORD = {
    "op_name": "abs",
    "dtype": "torch.float16",
    "mode": "cuda",
    "level": "core",
    "result": [
        {"shape_detail": [[1024, 1024]], "latency_base": 0.02, "latency": 0.01, "speedup": 2.0},
        {"shape_detail": [[64, 64]], "latency_base": 0.012, "latency": 0.004, "speedup": 3.0},
    ],
}

BENCH = f"""
import json
import pytest

@pytest.mark.abs
def test_abs_perf(request):
    assert request.config.getoption("--record") == "log"
    with open("result_test_abs--level_core--record_log.log", "w") as f:
        f.write("[INFO] " + json.dumps({RECORD!r}) + "\\n")
"""


def run_cpu_job(
    spec: JobSpec,
    tmp_path: Path,
    packages: PackageSources | None = None,
    max_rounds: int | None = None,
) -> tuple[JobResult, str]:
    """`spec` run by the cpu workflow with its caches under `tmp_path` (its layouts' comparisons
    capped at `max_rounds` rounds of processes); the result and the log."""
    log = bytearray()
    extra = {} if packages is None else {"packages": packages}
    ctx = job_context(tmp_path, log.extend, **extra)
    workflow = load_workflows()["cpu"]
    if max_rounds is not None:
        layouts = {
            name: [
                s.model_copy(
                    update={"compare": s.compare.model_copy(update={"max_rounds": max_rounds})}
                )
                for s in steps
            ]
            for name, steps in workflow.layouts.items()
        }
        workflow = workflow.model_copy(update={"layouts": layouts})
    return execute(spec, workflow, ctx), log.decode()


def _git(repo: Path, *args: str) -> str:
    cmd = ["git", "-c", "user.name=t", "-c", "user.email=t@e", *args]
    return subprocess.run(cmd, cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


def make_flaggems_repo(path: Path) -> str:
    (path / "src" / "flag_gems").mkdir(parents=True)
    (path / "src" / "flag_gems" / "__init__.py").write_text("")
    (path / "tests").mkdir()
    (path / "benchmark").mkdir()
    (path / "pytest.ini").write_text("[pytest]\nmarkers =\n    abs: abs\n    add: add\n")
    (path / "tests" / "test_unary.py").write_text(
        "import pytest\n\n@pytest.mark.abs\ndef test_abs():\n    assert abs(-1) == 1\n"
    )
    (path / "benchmark" / "conftest.py").write_text(CONFTEST)
    (path / "benchmark" / "test_abs.py").write_text(BENCH)
    _git(path, "init", "-q")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "flaggems-ish")
    return _git(path, "rev-parse", "HEAD")


def test_flaggems_layout_end_to_end(tmp_path: Path) -> None:
    repo = tmp_path / "FlagGems"
    repo.mkdir()
    sha = make_flaggems_repo(repo)
    assert detect(repo) == FLAGGEMS and detect(tmp_path) is None
    spec = JobSpec(
        id=3, repo="o/FlagGems", clone_url=str(repo), pr_number=1, sha=sha, op="abs",
        backend="cpu",
    )  # fmt: skip
    result, text = run_cpu_job(spec, tmp_path)
    assert result.status is JobStatus.succeeded, text
    assert "repository layout: flaggems" in text
    assert result.accuracy is not None and result.accuracy.passed == 1
    bench = result.benchmark
    assert bench is not None
    assert [(r.dtype, r.size, r.speedup) for r in bench.rows] == [
        ("float16", [1024, 1024], 2.0),
        ("float16", [64, 64], 3.0),
    ]
    assert bench.arithmetic_mean_speedup == 2.5
    assert json.loads(json.dumps(result.model_dump(mode="json")))["benchmark"]["op"] == "abs"


POOL_TESTS = """
import pytest

@pytest.mark.adaptive_max_pool3d_backward
@pytest.mark.parametrize("n", [1, 2, 3])
def test_pool_backward(n):
    import yaml, ondemand_fg_dep  # the pinned host package and the one from the wheelhouse
    assert n > 0
"""

OTHER_TESTS = """
import pytest

raise RuntimeError("collected although it holds no test of the operator")
"""


def pool_bench(speedup: float) -> str:
    """FlagGems' benchmark of a backward op: `--record log` writes one `[INFO] {json}` line
    per dtype whose shape_detail holds the call's argument shapes (grad, input, indices)."""
    record = {
        "op_name": "adaptive_max_pool3d_backward",
        "dtype": "torch.float32",
        "mode": "cuda",
        "level": "core",
        "result": [
            {
                "legacy_shape": None,
                "shape_detail": [[1, 1, 4, 4, 4], [1, 1, 8, 8, 8], [1, 1, 4, 4, 4]],
                "latency_base": 0.008,
                "latency": 0.008 / speedup,
                "speedup": speedup,
            }
        ],
    }
    return f"""
import json
import pytest

print("benchmark module collected", flush=True)  # in the worker's start, while accuracy runs

@pytest.mark.adaptive_max_pool3d_backward
def test_perf():
    # Appended, as FlagGems' record logger does (its file is opened once a session).
    with open("result_test_adaptive_max_pool3d_backward--level_core--record_log.log", "a") as f:
        f.write("[INFO] " + json.dumps({record!r}) + "\\n")
"""


def test_a_flaggems_pull_request_end_to_end(tmp_path: Path) -> None:
    """Pins the host does not match are used as the host has them (and said so), what the
    host lacks comes from the runner's wheelhouse, only the files holding the operator's tests
    are collected, the Size column shows input → output, and the merge base gives before."""
    repo = tmp_path / "FlagGems"
    repo.mkdir()
    make_flaggems_repo(repo)
    yaml_version = subprocess.run(
        [sys.executable, "-c", "import yaml; print(yaml.__version__)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "flag_gems"\nversion = "0"\ndependencies = ["PyYAML==6.0.1"]\n'
        "[project.optional-dependencies]\n"
        'test = ["pytest==9.0.3", "ondemand-fg-dep==1.0"]\n'
    )
    (repo / "pytest.ini").write_text("[pytest]\npythonpath = src\n")
    (repo / "tests" / "test_pool_ops.py").write_text(POOL_TESTS)
    (repo / "tests" / "test_everything_else.py").write_text(OTHER_TESTS)
    (repo / "benchmark" / "test_adaptive_max_pool3d_backward.py").write_text(pool_bench(1.5))
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "base")
    _git(repo, "branch", "-M", "main")
    _git(repo, "checkout", "-q", "-b", "pr")
    (repo / "benchmark" / "test_adaptive_max_pool3d_backward.py").write_text(pool_bench(3.0))
    _git(repo, "commit", "-q", "-am", "a faster kernel")
    sha = _git(repo, "rev-parse", "HEAD")
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    _wheel(wheels, "ondemand_fg_dep", "1.0")
    spec = JobSpec(
        id=4, repo="o/FlagGems", clone_url=str(repo), pr_number=1, sha=sha,
        op="adaptive_max_pool3d_backward", backend="cpu", base_ref="main",
    )  # fmt: skip
    # No index at all: an offline host. Two rounds of processes show the merge base's side
    # (the rounds' statistics and their stopping rule are tests/runner/test_stats.py's).
    result, text = run_cpu_job(spec, tmp_path, PackageSources(wheelhouse=wheels), max_rounds=2)
    assert result.status is JobStatus.succeeded, text
    assert result.accuracy is not None and result.accuracy.passed == 3
    assert "tests/test_pool_ops.py -m adaptive_max_pool3d_backward" in text  # one file, not all
    assert f"PyYAML {yaml_version} (repository pins 6.0.1)" in result.environment.notes
    assert any(n.startswith("pytest ") for n in result.environment.notes)
    bench = result.benchmark
    assert bench is not None
    ((row),) = bench.rows
    assert (row.size, row.output_size) == ([1, 1, 8, 8, 8], [4, 4, 4])
    assert row.speedup == 3.0 and row.before_speedup == 1.5
    # The benchmark's workers started before the accuracy step (their imports and collection
    # pass while it runs); what they printed meanwhile is logged after it, not inside it.
    started = text.index("step benchmark (after worker):")
    accuracy_ran = text.index("step accuracy: exit 0")
    assert started < text.index("step accuracy: /") < accuracy_ran
    assert text.index("benchmark module collected") > accuracy_ran
    assert "step benchmark: workers started" in text
    (base_step,) = [s for s in result.steps if s.name == "benchmark (merge base)"]
    assert "ahead, during the steps before" in (base_step.message or ""), base_step


def test_workers_started_ahead_are_stopped_when_the_job_stops_before_their_step(
    tmp_path: Path,
) -> None:
    """The benchmark's worker starts before the accuracy step; accuracy that gives no verdict
    (a test file that does not compile) stops the job there, and the worker, never asked for
    a round, is stopped with it: no process of the job is left."""
    repo = tmp_path / "FlagGems"
    repo.mkdir()
    make_flaggems_repo(repo)
    (repo / "tests" / "test_unary.py").write_text("import pytest\n\ndef test_abs(:\n")
    _git(repo, "commit", "-q", "-am", "a broken test file")
    spec = JobSpec(
        id=5, repo="o/FlagGems", clone_url=str(repo), pr_number=1,
        sha=_git(repo, "rev-parse", "HEAD"), op="abs", backend="cpu",
    )  # fmt: skip
    log, groups = bytearray(), []
    ctx = job_context(tmp_path, log.extend, on_step_start=groups.append)
    result = execute(spec, load_workflows()["cpu"], ctx)
    text = log.decode()
    assert result.status is JobStatus.errored and result.error_step == "accuracy", text
    assert "step benchmark (after worker):" in text
    assert "step benchmark: what it started ahead is stopped unused" in text
    assert len(groups) == 2  # the worker's, then the accuracy step's
    for group in groups:
        with pytest.raises(ProcessLookupError):
            os.killpg(group, 0)


def test_size_of_reads_the_call_shapes_flaggems_records() -> None:
    backward = [[2, 3, 8, 8, 8], [2, 3, 16, 16, 16], [2, 3, 8, 8, 8]]
    assert size_of(backward, "adaptive_max_pool3d_backward") == ([2, 3, 16, 16, 16], [8, 8, 8])
    assert size_of([[1, 1, 8, 8, 8], [4, 4, 4]], "adaptive_max_pool3d") == (
        [1, 1, 8, 8, 8],
        [4, 4, 4],
    )
    assert size_of([[1024, 1024]], "abs") == ([1024, 1024], None)
    assert size_of([[64, 64], [64, 64]], "add") == ([64, 64], None)
    assert size_of([1024, 1024], "abs") == ([1024, 1024], None)  # an older, flat record
    assert size_of(None, "abs") == ([], None)
