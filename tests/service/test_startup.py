"""`ondemand serve` as a real process: it refuses to start without a webhook secret and GitHub
credentials unless told it is a local trial, then says in one line where it listens and where
its settings came from; Alembic's chatter stays out of its output."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

from service.settings import Settings, settings_source
from tests.support.live import free_port

ROOT = Path(__file__).resolve().parents[2]


def _env(**values: str) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("ONDEMAND_")}
    return {**clean, "PYTHONPATH": str(ROOT), **values}


def _serve_until_healthy(proc: subprocess.Popen[str], port: int) -> str:
    """Wait for the started service's /healthz, stop it, and return all it printed."""
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).is_success
                break
            except httpx.TransportError:
                assert proc.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
    finally:
        proc.terminate()
        output, _ = proc.communicate(timeout=15)
    return output


def test_missing_for_service() -> None:
    assert len(Settings(webhook_secrets=[], github_token=None).missing_for_service()) == 2
    only_token = Settings(webhook_secrets=[], github_token="t").missing_for_service()
    assert len(only_token) == 1 and "ONDEMAND_WEBHOOK_SECRETS" in only_token[0]
    assert Settings(webhook_secrets=["s"], github_token="t").missing_for_service() == []
    assert settings_source({}) == "settings: defaults (no ONDEMAND_* variable is set)"
    named = settings_source({"ONDEMAND_PUBLIC_URL": "x", "PATH": "/bin"})
    assert named.startswith("settings: ONDEMAND_PUBLIC_URL from the environment")


def test_serve_refuses_without_secret_or_credentials(tmp_path: Path) -> None:
    database = tmp_path / "never.db"
    done = subprocess.run(
        [sys.executable, "-m", "ondemand", "serve", "--port", str(free_port())],
        cwd=tmp_path,
        env=_env(ONDEMAND_DATABASE_URL=f"sqlite:///{database}"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert "refusing to start" in done.stderr
    assert "ONDEMAND_WEBHOOK_SECRETS" in done.stderr and "ONDEMAND_GITHUB_TOKEN" in done.stderr
    assert "--local-trial" in done.stderr
    assert not database.exists()  # refused before touching anything


def test_local_trial_starts_and_says_where(tmp_path: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ondemand", "serve", "--port", str(port), "--local-trial"],
        cwd=tmp_path,
        env=_env(ONDEMAND_DATABASE_URL=f"sqlite:///{tmp_path / 'trial.db'}"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    output = _serve_until_healthy(proc, port)
    lines = [line for line in output.splitlines() if line.startswith("ondemand serve:")]
    assert len(lines) == 1, output
    assert f"http://127.0.0.1:{port}" in lines[0] and "local trial" in lines[0]
    assert "ONDEMAND_DATABASE_URL from the environment" in lines[0]
    assert "trial.db" in lines[0]
    assert "alembic" not in output.lower(), output  # migrations log quietly
    assert "database schema migrated from empty to" in output


def test_a_database_that_does_not_answer_is_one_line_naming_the_setting(tmp_path: Path) -> None:
    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/test"
    done = subprocess.run(
        [sys.executable, "-m", "ondemand", "serve", "--port", str(free_port()), "--local-trial"],
        cwd=tmp_path, env=_env(ONDEMAND_DATABASE_URL=url), capture_output=True, text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert "does not answer" in done.stderr and "ONDEMAND_DATABASE_URL" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr


def test_a_deployment_is_told_at_start_up_what_it_has_wrong(tmp_path: Path) -> None:
    """No registration tokens, a loopback public URL, the default backends left unset: each
    one line with the setting, and it starts all the same."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ondemand", "serve", "--port", str(port)],
        cwd=tmp_path,
        env=_env(
            ONDEMAND_DATABASE_URL=f"sqlite:///{tmp_path / 'db'}",
            ONDEMAND_WEBHOOK_SECRETS="s",
            ONDEMAND_GITHUB_TOKEN="t",
            ONDEMAND_GITHUB_API_URL=f"http://127.0.0.1:{free_port()}",
        ),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    output = _serve_until_healthy(proc, port)
    told = [line for line in output.splitlines() if line.startswith("ondemand serve: ")]
    assert any("registration tokens" in t and "ONDEMAND_REGISTRATION_TOKENS" in t for t in told)
    assert any("public URL" in t and "ONDEMAND_PUBLIC_URL" in t for t in told), output
    assert any("default backends" in t and "ONDEMAND_DEFAULT_BACKENDS" in t for t in told)
