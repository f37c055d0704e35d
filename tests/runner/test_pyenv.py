"""The job's Python environment: the host's packages through a .pth, cached by the hash of the
dependency files."""

from __future__ import annotations

import subprocess
import time
from importlib import metadata
from pathlib import Path

import pytest

from runner.environment.pyenv import PythonEnvError, env_key, python_env
from runner.environment.requirements import declared_requirements, plan_requirements
from runner.environment.sources import PackageSources
from workflows.spec import load_workflows


def _project(path: Path, deps: str = "[]") -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "pyproject.toml").write_text(
        f'[project]\nname = "demo"\nversion = "1"\ndependencies = {deps}\n'
        "[project.optional-dependencies]\n"
        'test = ["pytest>=7", "demo[extra]"]\nextra = ["pydantic>=2"]\nunused = ["nope-xyz"]\n'
    )
    return path


def test_declared_and_missing_requirements(tmp_path: Path) -> None:
    repo = _project(tmp_path / "repo", '["torch>=2", "no-such-package-xyz>=1"]')
    (repo / "requirements.txt").write_text("# comment\nnumpy\n-r other.txt\n")
    reqs = declared_requirements(repo, ["test"], ["requirements.txt"])
    assert sorted(reqs) == sorted(
        ["torch>=2", "no-such-package-xyz>=1", "pytest>=7", "pydantic>=2", "numpy"]
    )
    assert list(plan_requirements(reqs).install) == ["no-such-package-xyz>=1"]
    # host first: a package the host has by name is used whatever the pin says
    assert list(plan_requirements(["pytest<1", 'foo-xyz; python_version < "3"']).install) == []


def test_host_first_plan_notes_pins_and_never_installs_the_device_stack() -> None:
    pytest_version = metadata.version("pytest")
    plan = plan_requirements(["PyTest==0.1", "torch==0.0.1", "triton<1", "absent-xyz==1.0"])
    assert plan.install == ("absent-xyz==1.0",)
    assert f"pytest {pytest_version} (repository pins 0.1)" in plan.notes
    assert any(n.startswith("torch ") and "(repository pins 0.0.1)" in n for n in plan.notes)
    assert any(n.startswith("triton ") and "(repository asks <1)" in n for n in plan.notes)
    strict = plan_requirements(["pytest==0.1", "torch==0.0.1"], strict=True)
    assert strict.install == ("pytest==0.1",)  # pins count, but torch is still the host's
    # The vendor's own packages are the workflow's to name: never installed either.
    musa = load_workflows()["mthreads"].device.host_only_names()
    assert plan_requirements(["torch-musa>=1"], host_only=musa).refused == ("torch-musa>=1",)
    assert plan_requirements(["torch-musa>=1"]).install == ("torch-musa>=1",)


def test_an_offline_host_names_what_is_missing_and_the_setting(tmp_path: Path) -> None:
    empty = tmp_path / "wheels"
    empty.mkdir()
    repo = _project(tmp_path / "repo", '["ondemand-absent-xyz==1.0", "pytest==0.1"]')
    with pytest.raises(PythonEnvError) as error:
        python_env(repo, tmp_path / "envs", sources=PackageSources(wheelhouse=empty))
    first = str(error.value).splitlines()[0]
    assert first.startswith(f"missing on this host and in wheelhouse {empty}: ")
    assert first.split(": ", 1)[1].startswith("ondemand-absent-xyz==1.0. Put its wheel")
    assert "--wheelhouse DIR or ONDEMAND_WHEELHOUSE" in first and "--index-url URL" in first
    # with the wheel in the wheelhouse, and no index at all, the same build succeeds
    _wheel(empty, "ondemand_absent_xyz", "1.0")
    logs: list[str] = []
    env = python_env(
        repo, tmp_path / "envs", sources=PackageSources(wheelhouse=empty), log=logs.append
    )
    assert env.installed == ("ondemand-absent-xyz==1.0",)
    assert any(n.startswith("pytest ") and "(repository pins 0.1)" in n for n in env.notes)
    assert any("using the host's pytest" in line for line in logs)


def test_the_wheelhouse_says_which_requirements_it_cannot_satisfy(tmp_path: Path) -> None:
    _wheel(tmp_path, "Py_Thing", "2.0")
    _wheel(tmp_path, "other", "1.0")
    (tmp_path / "notes.txt").write_text("not a wheel")
    sources = PackageSources(wheelhouse=tmp_path)
    reqs = ["py-thing>=1.5", "other==2.0", "absent", "py.thing<1"]
    assert sources.lacking(reqs) == ("other==2.0", "absent", "py.thing<1")
    # an index may hold anything: nothing is ruled out, pip's answer decides
    assert PackageSources(wheelhouse=tmp_path, index_url="http://i").lacking(reqs) == ()
    assert PackageSources().lacking(reqs) == ()


def test_env_reuses_host_torch_and_is_cached(tmp_path: Path) -> None:
    repo = _project(tmp_path / "repo")
    cache = tmp_path / "envs"
    first = python_env(repo, cache, extras=["test"])
    assert not first.reused and first.installed == ()
    out = subprocess.run(
        [
            str(first.python),
            "-c",
            "import importlib.util as u, sys; "
            "print(sys.prefix); print(u.find_spec('torch').origin)",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert out[0] == str(first.root)  # the venv's own prefix ...
    assert "site-packages" in out[1]  # ... with the host's torch
    started = time.monotonic()
    second = python_env(repo, cache, extras=["test"])
    assert second.reused and second.python == first.python
    assert time.monotonic() - started < 2.0  # making one takes a venv and a pip run
    # Another dependency file is another environment.
    (repo / "requirements.txt").write_text("pytest\n")
    assert env_key(repo, ["test"], ["requirements.txt"]) != first.key


def _wheel(directory: Path, name: str = "ondemand_tinydep", version: str = "1.0") -> Path:
    """A minimal pure-Python wheel, built by hand (no network, no build backend)."""
    import base64
    import hashlib
    import zipfile

    path = directory / f"{name}-{version}-py3-none-any.whl"
    info = f"{name}-{version}.dist-info"
    files = {
        f"{name}.py": "VALUE = 42\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{info}/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = []
    for file, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=")
        record.append(f"{file},sha256={digest.decode()},{len(text.encode())}")
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = "\n".join(record) + "\n"
    with zipfile.ZipFile(path, "w") as zf:
        for file, text in files.items():
            zf.writestr(file, text)
    return path


def test_missing_requirement_is_installed_into_the_env_only(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path)
    repo = _project(tmp_path / "repo", f'["ondemand_tinydep @ {wheel.as_uri()}"]')
    logs: list[str] = []
    env = python_env(repo, tmp_path / "envs", extras=["test"], log=logs.append)
    assert env.installed == (f"ondemand_tinydep @ {wheel.as_uri()}",)
    probe = (
        "import ondemand_tinydep, torch; print(ondemand_tinydep.VALUE, ondemand_tinydep.__file__)"
    )
    out = subprocess.run(
        [str(env.python), "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    assert out[0] == "42" and out[1].startswith(str(env.root))
    # The host (the runner's own interpreter) did not get it.
    assert list(plan_requirements(["ondemand_tinydep"]).install) == ["ondemand_tinydep"]
    assert any("installing what the host lacks" in line for line in logs)
    again = python_env(repo, tmp_path / "envs", extras=["test"])
    assert again.reused and again.installed == env.installed
