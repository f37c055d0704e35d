"""Settings from the environment, `ondemand serve` as a real process, and recovery of
deliveries a crash left unprocessed."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from service.db.engine import utcnow
from service.db.models import Delivery
from service.queue.jobs import NewJob
from service.settings import Settings
from tests.service.helpers import live_service, service_settings
from tests.support.keys import rsa_keypair
from tests.support.live import free_port
from workflows.models import JobStatus

ROOT = Path(__file__).resolve().parents[2]


def test_settings_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    key = tmp_path / "app.pem"
    pem, _ = rsa_keypair()
    key.write_text(pem)
    monkeypatch.setenv("ONDEMAND_WEBHOOK_SECRETS", "old, new")
    monkeypatch.setenv("ONDEMAND_DEFAULT_BACKENDS", '["mthreads", "cpu"]')
    monkeypatch.setenv("ONDEMAND_GITHUB_APP_ID", "42")
    monkeypatch.setenv("ONDEMAND_GITHUB_PRIVATE_KEY_PATH", str(key))
    monkeypatch.setenv("ONDEMAND_PUBLIC_URL", "https://ci.example.com/")
    settings = Settings()
    assert settings.webhook_secrets == ["old", "new"]
    assert settings.default_backends == ["mthreads", "cpu"]
    assert settings.private_key() == pem and settings.github_app_id == 42
    assert settings.public_url == "https://ci.example.com"
    assert settings.database_url.startswith("sqlite:///")


def test_app_id_without_key_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ONDEMAND_GITHUB_APP_ID", "42")
    with pytest.raises(ValidationError, match="PRIVATE_KEY"):
        Settings()


def test_serve_runs_and_answers(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "ONDEMAND_DATABASE_URL": f"sqlite:///{tmp_path / 'serve.db'}",
        "ONDEMAND_WEBHOOK_SECRETS": "s",
        "ONDEMAND_LOCAL_TRIAL": "1",  # no GitHub credentials
        "PATH": str(tmp_path),  # no git: it says so, and serves all the same
    }
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ondemand",
            "serve",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
                assert time.monotonic() < deadline
                time.sleep(0.1)
        assert answer.json() == {"status": "ok", "database": "sqlite", "database_state": "ok"}
        assert "On-demand kernel tests" in httpx.get(f"http://127.0.0.1:{port}/").text
        # A connection left idle past uvicorn's default 5 s is still the service's to use
        # (a proxy in front closes its idle connections first).
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            conn.request("GET", "/healthz")
            assert conn.getresponse().read() and conn.sock is not None
            first = conn.sock
            time.sleep(6)
            conn.request("GET", "/healthz")  # a closed one: RemoteDisconnected
            assert conn.getresponse().status == 200 and conn.sock is first
        finally:
            conn.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    said = proc.stdout.read().decode() if proc.stdout else ""
    assert "no git on PATH: `/test changed` will answer" in said, said


def test_serve_refuses_bad_settings(tmp_path: Path) -> None:
    env = {**os.environ, "ONDEMAND_DEFAULT_BACKENDS": "tpu", "ONDEMAND_LOCAL_TRIAL": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "ondemand", "serve", "--port", str(free_port())],
        cwd=tmp_path,
        env={**env, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2 and "tpu" in done.stderr


def test_unprocessed_deliveries_are_processed_at_startup(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'crash.db'}"
    settings = service_settings(url)
    # The previous process recorded a close delivery and crashed before processing it.
    with live_service(settings.model_copy(update={"process_workers": False})) as svc:
        job, _ = svc.service.jobs.create_job(
            NewJob(
                repo="octo/k", clone_url="/x", pr_number=5, sha="c" * 40, op="add", backend="cpu"
            )
        )
        with svc.service.db.writes() as session, session.begin():
            session.add(
                Delivery(
                    delivery_id="left-behind",
                    event="pull_request",
                    action="closed",
                    payload={
                        "action": "closed",
                        "pull_request": {
                            "number": 5,
                            "head": {"sha": "c" * 40},
                            "updated_at": "2026-12-01T10:00:00Z",
                        },
                        "repository": {"full_name": "octo/k"},
                    },
                    received_at=utcnow(),
                )
            )
        assert svc.service.jobs.get_job(job.id).status == JobStatus.queued
    with live_service(settings) as svc:
        deadline = time.monotonic() + 5
        while svc.service.jobs.get_job(job.id).status == JobStatus.queued:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert svc.service.jobs.get_job(job.id).status == JobStatus.cancelled
        assert svc.service.jobs.get_job(job.id).reason == "pull request closed"
