"""Bytecode for the host's packages: compiled by the runner into the environment, read by the
steps, never run stale, and never where the host already has its own."""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from runner.environment import bytecode, pyenv, requirements
from runner.job.execute import _Job
from tests.runner.jobs import job_context
from tests.runner.test_execute import CPU, _spec
from tests.runner.tinyrepo import TinyRepo


def _site(root: Path, packages: dict[str, str]) -> Path:
    """A site directory of one-module packages: name -> its __init__.py."""
    for name, text in packages.items():
        (root / name).mkdir(parents=True)
        (root / name / "__init__.py").write_text(text)
    return root


def _value(site: Path, prefix: Path | None) -> str:
    """`probe.VALUE` as a step would import it (no bytecode written, the prefix if any)."""
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    if prefix is not None:
        env["PYTHONPYCACHEPREFIX"] = str(prefix)
    return subprocess.run(
        [sys.executable, "-c", "import probe; print(probe.VALUE)"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def test_sources_follow_links_once_and_leave_test_suites_out(tmp_path: Path) -> None:
    site = _site(tmp_path / "site", {"pkg": "", "other": ""})
    (site / "pkg" / "tests").mkdir()
    (site / "pkg" / "tests" / "test_x.py").write_text("")
    (site / "pkg" / "__pycache__").mkdir()
    (site / "pkg" / "__pycache__" / "stray.py").write_text("")
    (site / "linked").symlink_to(site / "other", target_is_directory=True)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "mod.py").write_text("")
    (site / "far").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    found = sorted(os.path.relpath(p, site) for p in bytecode.sources([str(site)]))
    # `other` and its link are one directory: walked once, under either name.
    assert len(found) == 3 and found[0] == "far/mod.py" and found[-1] == "pkg/__init__.py"
    assert found[1] in ("linked/__init__.py", "other/__init__.py")


def test_a_host_lacks_bytecode_where_its_device_stack_or_most_packages_ship_none(
    tmp_path: Path,
) -> None:
    site = _site(tmp_path / "site", {"a": "", "b": "", "c": ""})
    assert bytecode.lacks_bytecode([str(site)])
    for name in ("a", "b"):  # compiled beside their sources, as pip does
        py_compile.compile(
            str(site / name / "__init__.py"),
            cfile=str(bytecode._own_bytecode(site / name / "__init__.py")),
        )
    assert not bytecode.lacks_bytecode([str(site)])
    assert not bytecode.lacks_bytecode([str(tmp_path / "absent")])
    # The device stack alone is reason enough: every step imports it, and it is the largest.
    _site(site, {"torch": "", **{f"small{i}": "" for i in range(5)}})
    for package in [site / "c", *(site / f"small{i}" for i in range(5))]:
        init = package / "__init__.py"
        py_compile.compile(str(init), cfile=str(bytecode._own_bytecode(init)))
    assert bytecode.lacks_bytecode([str(site)])  # one of nine without it, but that is torch


def test_steps_read_the_prefix_and_never_run_stale_bytecode(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    source = site / "probe.py"
    source.write_text("VALUE = 1\n")
    prefix = tmp_path / "prefix"
    out = subprocess.run(
        [sys.executable, "-I", str(bytecode.SCRIPT), str(prefix), str(site)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == "1 compiled, 0 failed"
    assert list(prefix.rglob("probe.*.pyc")), "no bytecode in the prefix"
    # Same size and time, other code: only a step that reads the prefix runs the compiled 1.
    stat = source.stat()
    source.write_text("VALUE = 2\n")
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert _value(site, prefix) == "1" and _value(site, None) == "2"
    # A real change (another size or time) is compiled from source, never the stale file.
    source.write_text("VALUE = 33\n")
    assert _value(site, prefix) == "33"


@pytest.fixture
def shipless_host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A host whose packages ship no bytecode: one small site directory stands in for the
    standard library and site-packages (compiling those takes seconds)."""
    site = _site(tmp_path / "host-site", {"probe": "VALUE = 7\n"})
    monkeypatch.setattr(pyenv.bytecode, "lacks_bytecode", lambda dirs, **_: True)
    monkeypatch.setattr(pyenv, "_bytecode_dirs", lambda root, host: [str(site)])
    return site


def test_the_environment_compiles_once_and_steps_get_the_prefix(
    shipless_host: Path, tiny_repo: TinyRepo, tmp_path: Path
) -> None:
    logs: list[str] = []
    first = pyenv.python_env(tiny_repo.path, tmp_path / "envs", log=logs.append)
    assert first.bytecode == first.root / pyenv.BYTECODE
    assert list(first.bytecode.rglob("__init__.*.pyc"))
    assert any("bytecode for the host's packages (they ship none): 1 compiled" in m for m in logs)
    assert not (first.bytecode.stat().st_mode & 0o022)  # the runner's alone
    logs.clear()
    again = pyenv.python_env(tiny_repo.path, tmp_path / "envs", log=logs.append)
    assert again.reused and again.bytecode == first.bytecode
    assert not any("bytecode" in m for m in logs)  # recorded: not compiled twice
    # A step's environment names its environment's prefix (the workflow's extras make it
    # another environment than the one above).
    job = _Job(_spec(tiny_repo, "good_op"), CPU, job_context(tmp_path))
    _, env = job.environ(tiny_repo.path)
    prefix = Path(env["PYTHONPYCACHEPREFIX"])
    assert prefix == Path(env["VIRTUAL_ENV"]) / pyenv.BYTECODE
    assert list(prefix.rglob("__init__.*.pyc"))


def test_a_prefix_others_could_write_is_not_reused(
    shipless_host: Path, tiny_repo: TinyRepo, tmp_path: Path
) -> None:
    first = pyenv.python_env(tiny_repo.path, tmp_path / "envs")
    assert first.bytecode is not None
    first.bytecode.chmod(0o777)  # a job user could plant bytecode there
    again = pyenv.python_env(tiny_repo.path, tmp_path / "envs")
    assert not again.reused and again.bytecode is not None
    assert not (again.bytecode.stat().st_mode & 0o022)


def test_no_prefix_where_the_host_ships_bytecode(tiny_repo: TinyRepo, tmp_path: Path) -> None:
    env = pyenv.python_env(tiny_repo.path, tmp_path / "envs")
    expected = bytecode.lacks_bytecode(requirements.host_site_dirs())
    assert (env.bytecode is not None) == expected


HOST_PYTHON = os.environ.get("ONDEMAND_TEST_PYTHON310")


def test_another_pythons_environment_gets_bytecode_of_its_own_version(
    shipless_host: Path, tiny_repo: TinyRepo, tmp_path: Path
) -> None:
    """A job's Python other than the runner's (CPython 3.10 beside torch_musa): the compiler
    runs under it, and what it writes is read by it (its own bytecode tag)."""
    if not HOST_PYTHON:
        if os.environ.get("CI"):
            pytest.fail("ONDEMAND_TEST_PYTHON310 is not set (devtools/python310-host.sh)")
        pytest.skip("no CPython 3.10 host (devtools/python310-host.sh, ONDEMAND_TEST_PYTHON310)")
    from runner.environment.interpreter import probe

    host = probe(HOST_PYTHON)
    env = pyenv.python_env(tiny_repo.path, tmp_path / "envs", host=host)
    assert env.host == host and env.bytecode is not None
    compiled = list(env.bytecode.rglob("__init__.*.pyc"))
    assert compiled and all(".cpython-310." in p.name for p in compiled), compiled
    version = subprocess.run(
        [str(env.python), "-c", "import sys; print(sys.version_info[:2])"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert version.strip() == "(3, 10)"
