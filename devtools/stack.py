"""The demo's processes: the GitHub sandbox, the service and one runner, each a real `ondemand`
subprocess in its own process group, with its log in the demo's directory."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Proc:
    """One child process and the log file it writes."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass
class Stack:
    """Starts children and guarantees they are all gone when it closes."""

    directory: Path
    procs: list[Proc] = field(default_factory=list)

    def start(self, name: str, argv: list[str], env: dict[str, str]) -> Proc:
        log = self.directory / f"{name}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                [sys.executable, "-m", "ondemand", *argv],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **env},
                start_new_session=True,
            )
        proc = Proc(name, popen, log)
        self.procs.append(proc)
        return proc

    def wait_http(self, proc: Proc, url: str, timeout: float = 60.0) -> None:
        """Wait until `url` answers 2xx; fail with the child's log if it died or never did."""
        wait_answering(proc.name, url, proc.alive, proc.log_tail, timeout)

    def close(self, grace: float = 10.0) -> None:
        """SIGTERM every process group twice (a runner's second SIGTERM cancels its job rather
        than finishing it), then SIGKILL what is left after `grace` seconds."""
        for proc in reversed(self.procs):
            _signal_group(proc, signal.SIGTERM)
        time.sleep(0.3)
        for proc in reversed(self.procs):
            if proc.alive():
                _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc in reversed(self.procs):
            try:
                proc.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.popen.wait(timeout=5)
        for proc in self.procs:  # steps the runner started live in its group's descendants
            _signal_group(proc, signal.SIGKILL)


def _signal_group(proc: Proc, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.popen.pid, sig)


def wait_answering(
    name: str, url: str, alive: Callable[[], bool], tail: Callable[[], str], timeout: float = 60.0
) -> None:
    """Wait until `url` answers 2xx; RuntimeError with the process's log (`tail`) if it died
    (`alive` false) or never answered within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError(f"{name} exited early:\n{tail()}")
        try:
            if httpx.get(url, timeout=2).is_success:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"{name} did not answer {url} in {timeout:.0f}s:\n{tail()}")
