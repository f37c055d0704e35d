"""A FlagGems-style repository, detected from its checkout and run with the workflow's
`layouts.flaggems` steps: accuracy from tests/ by marker, benchmark records from
benchmark/test_<op>.py."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

from runner.execute import JobContext, execute
from runner.layouts import FLAGGEMS, detect
from runner.workspace import Workspaces
from workflows.models import JobSpec, JobStatus
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
    log = bytearray()
    ctx = JobContext(
        workspaces=Workspaces(tmp_path / "cache"),
        env_cache=tmp_path / "envs",
        job_dir=tmp_path / "job",
        runner_name="r",
        runner_version="0",
        on_output=log.extend,
        cancel=threading.Event(),
    )
    result = execute(spec, load_workflows()["cpu"], ctx)
    assert result.status is JobStatus.succeeded, log.decode()
    assert "repository layout: flaggems" in log.decode()
    assert result.accuracy is not None and result.accuracy.passed == 1
    bench = result.benchmark
    assert bench is not None
    assert [(r.dtype, r.size, r.speedup) for r in bench.rows] == [
        ("float16", [1024, 1024], 2.0),
        ("float16", [64, 64], 3.0),
    ]
    assert bench.arithmetic_mean_speedup == 2.5
    assert json.loads(json.dumps(result.model_dump(mode="json")))["benchmark"]["op"] == "abs"
