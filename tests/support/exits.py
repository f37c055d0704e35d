"""Many short runs of the `ondemand` command line, each a process of its own forked from one
that imported everything once: each run's exit status and stderr are a real process's (a
traceback printed as Python prints one, a setuid user's file access the kernel's) at a fork's
cost instead of an interpreter's start.

`python -m tests.support.exits` reads one JSON case a line (argv, env, cwd, user) and answers
one JSON line each: the exit status and what the run wrote to stderr."""

from __future__ import annotations

import json
import os
import pwd
import select
import signal
import subprocess
import sys
import time
import traceback
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 20.0  # a case the command accepted would serve: it is stopped and reported


@dataclass(frozen=True)
class Case:
    argv: list[str]
    env: dict[str, str]
    cwd: str
    user: str | None = None  # run as this user (the parent runs as root)
    label: str = ""


@dataclass
class Exit:
    status: int
    stderr: str
    label: str = ""
    timed_out: bool = False


def _child(case: Case, err: int) -> None:
    """In the forked child: become the case's process, run the command line, exit as the
    `ondemand` console script would."""
    code: int = 1
    try:
        os.dup2(err, 2)
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        if case.user:
            user = pwd.getpwnam(case.user)
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
        os.chdir(case.cwd)
        os.environ.clear()
        os.environ.update(case.env)
        from ondemand.cli import main

        code = int(main(case.argv) or 0)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with suppress(Exception):
                stream.flush()
        os._exit(code)


def run(case: Case) -> Exit:
    """One case in a forked child."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        _child(case, write)
    os.close(write)
    chunks: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT_S
    timed_out = False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            os.kill(pid, signal.SIGKILL)
            timed_out = True
            break
        ready, _, _ = select.select([read], [], [], left)
        if ready:
            chunk = os.read(read, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    os.close(read)
    _, status = os.waitpid(pid, 0)
    return Exit(
        os.waitstatus_to_exitcode(status),
        b"".join(chunks).decode(errors="replace"),
        case.label,
        timed_out,
    )


def serve_cases() -> None:
    """The server's loop: the command line imported once, then a forked child per case (with
    SQLAlchemy's SQLite dialect, which a service's case would otherwise import each time: a
    third of its CPU)."""
    import sqlalchemy.dialects.sqlite  # noqa: F401

    import ondemand.cli  # noqa: F401
    import runner.cli
    import runner.doctor  # noqa: F401
    import service.doctor
    import service.server  # noqa: F401

    for line in sys.stdin:
        result = run(Case(**json.loads(line)))
        print(json.dumps(asdict(result)), flush=True)


@contextmanager
def exits_server() -> Iterator[Any]:
    """A function running cases in the server (started once), as a list of `Exit`."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.support.exits"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def each(cases: Sequence[Case]) -> list[Exit]:
        found = []
        for case in cases:
            stdin.write(json.dumps(asdict(case)) + "\n")
            stdin.flush()
            found.append(Exit(**json.loads(stdout.readline())))
        return found

    try:
        yield each
    finally:
        stdin.close()
        proc.wait(timeout=30)


if __name__ == "__main__":
    serve_cases()
