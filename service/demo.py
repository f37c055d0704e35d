"""`ondemand demo`: the whole loop on this machine. A GitHub sandbox, the service (SQLite) and
a runner for one backend start on loopback; a pull request whose head is this checkout's
commit gets a `/test` comment from a maintainer; each step is shown as it happens, then the
result comment as the pull request shows it. Exit status 0 when the verdict is a pass."""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from service.settings import Settings
from workflows.models import JobStatus

ROOT = Path(__file__).resolve().parent.parent
REPO = "demo/kernels"
MAINTAINER = "maintainer"
BOT = "ondemand-bot"
BRANCH = "ondemand-demo"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _serve(app: Any, port: int | None = None) -> Iterator[str]:
    """Serve an ASGI app on a (free) loopback port in a thread; yields its URL."""
    port = port or _free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("a server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=20)


def _git(*args: str) -> str:
    done = subprocess.run(["git", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


def _say(text: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ondemand demo", description=__doc__)
    parser.add_argument("--backend", default="cpu", help="backend the runner serves (default cpu)")
    parser.add_argument("--op", default="adaptive_max_pool3d_backward", help="operator to test")
    parser.add_argument("--repo", type=Path, default=ROOT, help="git checkout to test")
    parser.add_argument("--ref", default="HEAD", help="commit of --repo to test (default HEAD)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds to wait for a result")
    parser.add_argument("--keep", action="store_true", help="keep everything running at the end")
    return parser


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    try:
        sha = _git("-C", str(args.repo), "rev-parse", "--verify", f"{args.ref}^{{commit}}")
    except RuntimeError as exc:
        print(f"ondemand demo: {exc}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="ondemand-demo-") as tmp, ExitStack() as stack:
        return _demo(args, sha, Path(tmp), stack)


def _demo(args: argparse.Namespace, sha: str, tmp: Path, stack: ExitStack) -> int:
    from sandbox.app import create_app as create_sandbox
    from sandbox.client import SandboxAdmin
    from service.app import create_app

    # The sandbox's repository: a bare clone with a branch at the commit under test, so the
    # sandbox can write refs/pull/N/head without touching the checkout.
    bare = tmp / "kernels.git"
    _git("clone", "-q", "--bare", str(args.repo), str(bare))
    _git("-C", str(bare), "fetch", "-q", str(args.repo), f"{sha}:refs/heads/{BRANCH}")
    base = _git("-C", str(bare), "symbolic-ref", "--short", "HEAD")
    _say(f"repository {REPO}: {args.repo} at {sha[:7]} (base {base})")

    gh_url = stack.enter_context(_serve(create_sandbox()))
    admin = stack.enter_context(SandboxAdmin(gh_url))
    admin.create_user("demo", "Organization")
    admin.create_user(MAINTAINER)
    admin.create_user(BOT, "Bot")
    token = admin.create_token(BOT)
    admin.create_repo("demo", "kernels", str(bare), default_branch=base)
    admin.set_permission(REPO, MAINTAINER, "write")
    pr = admin.open_pull(REPO, head=BRANCH, base=base, user=MAINTAINER, title=f"Test {args.op}")
    number = int(pr["number"])
    _say(f"GitHub sandbox at {gh_url}: pull request #{number}")

    secret, registration = secrets.token_hex(16), secrets.token_hex(16)
    port = _free_port()
    settings = Settings(
        public_url=f"http://127.0.0.1:{port}",
        database_url=f"sqlite:///{tmp / 'ondemand.db'}",
        github_api_url=gh_url,
        github_token=token,
        bot_login=BOT,
        webhook_secrets=[secret],
        registration_tokens=[registration],
        default_backends=[args.backend],
    )
    app = create_app(settings)
    port_url = stack.enter_context(_serve(app, port))
    ctx = app.state.ctx
    admin.set_webhook(f"{port_url}/webhook", secret)
    _say(f"service at {port_url} (dashboard: {port_url}/)")

    runner_log = tmp / "runner.log"
    runner = _start_runner(args.backend, port_url, registration, tmp, runner_log)
    stack.callback(_stop, runner)
    _say(f"runner demo-{args.backend} started (log: {runner_log})")
    deadline = time.monotonic() + 120
    while ctx.store.runners_online(args.backend) == 0:
        if runner.poll() is not None or time.monotonic() > deadline:
            _say(f"the runner did not come online; its log:\n{runner_log.read_text()[-3000:]}")
            return 2
        time.sleep(0.2)
    _say(f"runner demo-{args.backend} online")

    command = f"/test | {args.op}:{args.backend}"
    comment = admin.comment(REPO, number, MAINTAINER, command)
    _say(f"@{MAINTAINER} commented: {command}")

    status = _watch(admin, ctx, number, int(comment["id"]), runner, args.timeout)
    bodies = [c for c in admin.comments(REPO, number) if c["user"] == BOT]
    print("\n" + "=" * 78 + "\nThe result comment on the pull request:\n" + "=" * 78)
    for c in bodies:
        if c["body"].startswith("<!-- ondemand:") and ":reply:" not in c["body"][:40]:
            print(c["body"])
    print("=" * 78)
    if status is None:
        _say(f"no result within {args.timeout:.0f}s; runner log: {runner_log}")
        print(runner_log.read_text()[-3000:] if runner_log.exists() else "", file=sys.stderr)
    else:
        _say(f"verdict: {status}")
    if args.keep:
        _say(f"kept running: sandbox {gh_url}, service {port_url}. Ctrl-C stops.")
        try:
            while runner.poll() is None:
                time.sleep(1)
        except KeyboardInterrupt:
            pass
    return 0 if status == JobStatus.succeeded else 1


def _start_runner(
    backend: str, url: str, registration: str, tmp: Path, log: Path
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "ONDEMAND_REGISTRATION_TOKEN": registration}
    argv = [
        sys.executable,
        "-m",
        "service.cli",
        "runner",
        "--service",
        url,
        "--backend",
        backend,
        "--name",
        f"demo-{backend}",
        "--state-dir",
        str(tmp / "runner"),
        "--poll-seconds",
        "5",
    ]
    with log.open("wb") as out:
        return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # the second SIGTERM cancels the current job
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _watch(
    admin: Any,
    ctx: Any,
    number: int,
    comment_id: int,
    runner: subprocess.Popen[bytes],
    timeout: float,
) -> JobStatus | None:
    """Print each visible step until the job is final and GitHub shows it; the final state."""
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    final: JobStatus | None = None
    settled_at: float | None = None

    def once(key: str, text: str) -> None:
        if key not in seen:
            seen.add(key)
            _say(text)

    while time.monotonic() < deadline:
        state = admin.state()
        for d in state["deliveries"]:
            if d.get("status_code"):
                once(f"d{d['id']}", f"webhook {d['event']} delivered → {d['status_code']}")
        for c in state["comments"]:
            if c["id"] == comment_id:
                for r in c.get("reactions", []):
                    once(f"r{r['content']}", f"the bot reacted :{r['content']}:")
            elif c["user"] == BOT and c["issue_number"] == number:
                head = next((ln for ln in c["body"].splitlines()[1:] if ln.strip()), "")
                once(f"c{c['id']}:{head}", f"comment {c['id']}: {head.strip()[:110]}")
        for s in state["statuses"]:
            once(f"s{s['context']}{s['state']}", f"status {s['context']}: {s['state']}")
        for job in ctx.store.recent_jobs(10):
            extra = f" on {job.runner_name}" if job.runner_name else ""
            once(f"j{job.id}{job.status}", f"job #{job.id} {job.status}{extra}")
            if JobStatus(job.status).final:
                final = JobStatus(job.status)
        if final is not None:
            settled_at = settled_at or time.monotonic()
            if _outbox_empty(ctx) or time.monotonic() - settled_at > 30:
                return final
        if runner.poll() is not None and final is None:
            _say(f"the runner exited with status {runner.returncode}")
            return None
        time.sleep(0.3)
    return final


def _outbox_empty(ctx: Any) -> bool:
    from sqlalchemy import select

    from service.models import OutboxItem

    with ctx.sessions() as session:
        return (
            session.scalars(select(OutboxItem.id).where(OutboxItem.done_at.is_(None))).first()
            is None
        )
