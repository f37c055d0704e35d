"""A small real git repository whose tests fail by design, one of each class a failing test's
re-runs can show: one that fails only on its first run in a checkout (flaky), one that fails
on the merge base too (already failing), one the pull request breaks (new) and one that takes
its process down when re-run (infrastructure), beside one that passes. The merge base's
`.github/ondemand.yml` sets the re-runs and the gate. `tools/failure_classes.py` builds it
with a test that fails one time in three at random instead (`flaky="random"`)."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

OP = "classes_op"

PYPROJECT = f"""\
[project]
name = "failops"
version = "0.1.0"
dependencies = []

[project.optional-dependencies]
test = ["pytest>=7"]

[tool.pytest.ini_options]
addopts = "--strict-markers"
markers = ["{OP}: fails by design"]
"""

HEADER = """\
import os
import pathlib

import pytest

from failops import VALUE

HERE = pathlib.Path(__file__).parent


def _first_run(name):
    mark = HERE / f".{name}-ran"
    if mark.exists():
        return False
    mark.write_text("ran")
    return True

"""

TESTS = {
    "stable": """
@pytest.mark.classes_op
def test_stable():
    pass
""",
    "flaky": """
@pytest.mark.classes_op
def test_flaky():
    assert not _first_run("flaky"), "fails on its first run only"
""",
    "random": """
@pytest.mark.classes_op
def test_flaky():
    assert int.from_bytes(os.urandom(4), "big") % 3, "fails one time in three"
""",
    "old": """
@pytest.mark.classes_op
def test_old():
    assert False, "broken on the merge base too"
""",
    "new": """
@pytest.mark.classes_op
def test_new():
    assert VALUE == 2, "the pull request changed VALUE"
""",
    "crash": """
@pytest.mark.classes_op
def test_crash():
    if not _first_run("crash"):
        os._exit(3)  # its re-runs take their process down with them
    assert False, "worker 'gw0' crashed while running it"
""",
}

SETTINGS = """\
failures:
  reruns: {reruns}
  gate: [new, infrastructure]
"""


@dataclass(frozen=True)
class FailRepo:
    path: Path
    base_sha: str  # `main`: VALUE = 2
    head_sha: str  # `pr`: VALUE = 3


def _git(repo: Path, *args: str) -> str:
    config = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"]
    done = subprocess.run(
        ["git", *config, *args], cwd=repo, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def make_fail_repo(
    path: Path, flaky: str = "flaky", crash: bool = True, reruns: int | None = 2
) -> FailRepo:
    """The repository: `main` at the merge base, `pr` one commit ahead (refs/pull/9/head).
    `reruns` None: no settings file (the defaults apply)."""
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    names = ["stable", flaky, "old", "new"] + (["crash"] if crash else [])
    (path / "pyproject.toml").write_text(PYPROJECT)
    (path / "failops").mkdir()
    (path / "failops" / "__init__.py").write_text("VALUE = 2\n")
    tests = path / "tests" / "kernels"
    tests.mkdir(parents=True)
    (path / "tests" / "__init__.py").write_text("")
    (tests / "__init__.py").write_text("")
    (tests / "test_classes.py").write_text(HEADER + "".join(TESTS[n] for n in names))
    (path / ".gitignore").write_text(".*-ran\n")
    if reruns is not None:
        (path / ".github").mkdir()
        (path / ".github" / "ondemand.yml").write_text(SETTINGS.format(reruns=reruns))
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "base")
    base = _git(path, "rev-parse", "HEAD")
    _git(path, "checkout", "-q", "-b", "pr")
    (path / "failops" / "__init__.py").write_text("VALUE = 3\n")
    _git(path, "commit", "-q", "-am", "change VALUE")
    head = _git(path, "rev-parse", "HEAD")
    _git(path, "update-ref", "refs/pull/9/head", head)
    _git(path, "checkout", "-q", "main")
    return FailRepo(path, base, head)
