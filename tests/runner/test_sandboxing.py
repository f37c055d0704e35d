"""The scrubbed environment of the steps, and network isolation where the host allows it."""

from __future__ import annotations

import socket
import sys
import threading
from pathlib import Path

import pytest

from runner.job.sandboxing import jail_for_host, scrubbed_env
from runner.job.steps import run_step


def test_only_the_allow_list_survives(tmp_path: Path) -> None:
    source = {
        "PATH": "/usr/bin:/bin",
        "LANG": "en_US.UTF-8",
        "HOME": "/root",
        "ONDEMAND_RUNNER_TOKEN": "secret",
        "ONDEMAND_SERVICE_URL": "http://service",
        "AWS_SECRET_ACCESS_KEY": "secret",
        "GITHUB_TOKEN": "secret",
    }
    env = scrubbed_env(
        source,
        home=tmp_path / "home",
        workflow_env={"KERNELS_VENDOR": "mthreads", "ONDEMAND_SNEAKY": "x"},
        visible_devices=("MUSA_VISIBLE_DEVICES", "2"),
    )
    assert env["PATH"] == "/usr/bin:/bin"
    assert env["LANG"] == "en_US.UTF-8"
    assert env["HOME"] == str(tmp_path / "home")
    assert env["KERNELS_VENDOR"] == "mthreads"
    assert env["MUSA_VISIBLE_DEVICES"] == "2"
    assert env["TRITON_CACHE_DIR"].startswith(str(tmp_path / "home"))
    assert "secret" not in env.values()
    assert not [k for k in env if k.startswith("ONDEMAND_")]
    assert (tmp_path / "home" / "tmp").is_dir()


def test_isolated_step_cannot_reach_loopback(tmp_path: Path) -> None:
    jail = jail_for_host(None, network=True)
    if jail is None:
        pytest.skip("this host allows no network namespace (unshare -n and -rn both refused)")
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    threading.Thread(target=lambda: server.accept()[0].close(), daemon=True).start()
    probe = (
        "import socket, sys\n"
        "try:\n"
        f"    socket.create_connection(('127.0.0.1', {port}), timeout=2).close()\n"
        "    print('REACHED')\n"
        "except OSError as e:\n"
        "    print('BLOCKED', e)\n"
    )
    env = {"PATH": "/usr/bin:/bin"}
    free = run_step([sys.executable, "-c", probe], cwd=tmp_path, env=env, timeout_s=30)
    boxed = run_step(jail.argv([sys.executable, "-c", probe]), cwd=tmp_path, env=env, timeout_s=30)
    server.close()
    assert "REACHED" in free.tail
    assert "BLOCKED" in boxed.tail, boxed.tail
