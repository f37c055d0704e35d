"""The job's interpreter: probed, chosen by setting or by what it can import, and refused with
the reason when it cannot serve (too old, no venv, not a Python, lacking the vendor's torch)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from runner.daemon.config import DaemonConfig
from runner.daemon.pool import job_interpreters
from runner.environment import interpreter, requirements
from runner.environment.interpreter import InterpreterError, find, parse_choices, probe
from workflows.spec import load_workflows


def _fake_python(path: Path, answer: dict[str, object]) -> Path:
    """An executable that answers the probe as some other Python would."""
    path.write_text(f"#!/bin/sh\necho '{json.dumps(answer)}'\n")
    path.chmod(0o755)
    return path


def _answer(**changes: object) -> dict[str, object]:
    own = probe(sys.executable)
    answer: dict[str, object] = {
        "executable": "/usr/bin/python3.8",
        "version": own.version,
        "version_info": list(own.version_info),
        "implementation": "cpython",
        "cache_tag": own.cache_tag,
        "site_dirs": list(own.site_dirs),
        "stdlib": list(own.stdlib),
        "path": [],
        "markers": dict(own.markers),
        "modules": {},
        "has_venv": True,
        "has_pip": True,
    }
    answer.update(changes)
    return answer


def test_the_runners_own_python_describes_itself_as_the_runner_sees_it() -> None:
    own = probe(sys.executable, ["json", "no_such_module_xyz"])
    assert own.own
    assert own.version_info == sys.version_info[:2]
    assert own.cache_tag == sys.implementation.cache_tag
    assert list(own.site_dirs) == requirements.host_site_dirs()
    assert own.modules == {"json": True, "no_such_module_xyz": False}
    assert own.lacks(["json", "no_such_module_xyz"]) == ["no_such_module_xyz"]
    assert own.markers["python_version"] == f"{sys.version_info[0]}.{sys.version_info[1]}"


def test_what_is_not_a_usable_python_is_refused_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(InterpreterError, match="cannot run it"):
        probe(tmp_path / "absent")
    silent = tmp_path / "silent"
    silent.write_text("#!/bin/sh\nexit 3\n")
    silent.chmod(0o755)
    with pytest.raises(InterpreterError, match="not a Python that answers the probe"):
        probe(silent)
    old = _fake_python(tmp_path / "old", _answer(version="3.8.10", version_info=[3, 8]))
    with pytest.raises(InterpreterError, match=r"Python 3\.8\.10\): jobs need Python 3\.10"):
        probe(old)
    novenv = _fake_python(tmp_path / "novenv", _answer(has_venv=False))
    with pytest.raises(InterpreterError, match="python3-venv"):
        probe(novenv)


def test_a_configured_python_must_have_the_workflows_host_modules(tmp_path: Path) -> None:
    chosen, how = find(["json"], sys.executable)
    assert chosen.own and how == "as configured"
    with pytest.raises(InterpreterError, match=r"cannot import no_such_musa_xyz.*--python"):
        find(["json", "no_such_musa_xyz"], sys.executable)


def test_probing_takes_the_first_python_that_has_them_all_and_says_what_it_passed_over(
    tmp_path: Path,
) -> None:
    lacking = _fake_python(tmp_path / "lacking", _answer(modules={"torch_musa": False}))
    having = _fake_python(tmp_path / "having", _answer(modules={"torch_musa": True}))
    chosen, how = find(["torch_musa"], search=[lacking, tmp_path / "absent", having])
    assert chosen.executable == having and how == "found by probing"
    with pytest.raises(InterpreterError) as caught:
        find(["torch_musa"], search=[lacking, tmp_path / "absent"])
    message = str(caught.value)
    assert "no Python on this host can import torch_musa" in message
    assert f"{lacking} (Python" in message and "lacks torch_musa" in message
    assert "cannot run it" in message and "--python PATH" in message


def test_the_usual_places_start_with_the_runners_own_and_name_each_file_once() -> None:
    found = interpreter.candidates()
    assert found[0] == Path(sys.executable)
    resolved = [p.resolve() for p in found]
    assert len(resolved) == len(set(resolved))


def test_python_choices_by_backend() -> None:
    backends = ["cpu", "mthreads"]
    assert parse_choices(["/usr/bin/python3.10"], backends) == {
        "cpu": Path("/usr/bin/python3.10"),
        "mthreads": Path("/usr/bin/python3.10"),
    }
    both = parse_choices(["mthreads=/opt/musa/python", "/usr/bin/python3"], backends)
    assert both == {"mthreads": Path("/opt/musa/python"), "cpu": Path("/usr/bin/python3")}
    assert parse_choices(["cpu=/a, mthreads=/b"], backends) == {
        "cpu": Path("/a"),
        "mthreads": Path("/b"),
    }
    with pytest.raises(ValueError, match="serves no backend 'nvidia'"):
        parse_choices(["nvidia=/x"], backends)


def test_the_daemon_finds_each_backends_python_and_refuses_a_configured_one_that_fails(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    workflows = load_workflows()
    base = {"service_url": "http://127.0.0.1:9", "name": "t", "state_dir": tmp_path}
    config = DaemonConfig(**base, backends=["cpu"], work_dir=tmp_path / "w")
    with caplog.at_level(logging.INFO, logger="ondemand.runner"):
        found, missing = job_interpreters(config, workflows)
    assert found["cpu"].own and not missing  # the test's own Python has torch and triton
    assert f"backend cpu: jobs run on {sys.executable}" in caplog.text
    # No Python here has torch_musa: the backend is sick with the reason, the runner runs on.
    musa = DaemonConfig(**base, backends=["mthreads"], work_dir=tmp_path / "w")
    found, missing = job_interpreters(musa, workflows)
    assert not found and "can import torch, torch_musa" in missing["mthreads"]
    wrong = DaemonConfig(
        **base, backends=["cpu"], work_dir=tmp_path / "w", pythons={"cpu": tmp_path / "absent"}
    )
    with pytest.raises(SystemExit, match=r"--python for cpu: .*absent: cannot run it"):
        job_interpreters(wrong, workflows)


def test_ondemand_run_refuses_a_python_that_cannot_serve(tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "ondemand", "run", "adaptive_max_pool3d_backward:cpu",
         "--repo", str(root), "--python", str(tmp_path / "absent")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "absent: cannot run it" in done.stderr
