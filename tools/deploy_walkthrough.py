"""The deployment guide tried as a lab would, here: `python -m tools.deploy_walkthrough`.

Follows docs/deploy.md on this machine against the GitHub sandbox: an App whose installation
grants exactly the permissions the guide's table lists (read from the guide, not the code), the
service started as its unit starts it (the unit's ExecStart and an EnvironmentFile like the
guide's, on PostgreSQL), a runner as its unit starts it whose jobs run on a CPython 3.10 with
torch (`--python`, devtools/python310-host.sh), then `/test` on a private repository's pull
request until its check run concludes. Then Contents: read is taken from the installation:
`ondemand doctor service` must name it, the restarted service must say so at start-up, a
`/test` must be answered on the pull request with the permission, and once an owner grants it
again the parked command must get its verdict (no delivery lost). Prints each step with its
time and exits non-zero at the first that does not hold.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg

from devtools.stack import Stack
from sandbox.client import SandboxAdmin
from tests.support.git import git
from tests.support.keys import rsa_keypair
from tests.support.live import free_port
from tests.support.workflows import small_cpu_workflows

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "deploy.md"
OP, OWNER, NAME = "adaptive_max_pool3d_backward", "acme", "kernels"
REPO = f"{OWNER}/{NAME}"
APP_ID = 4242
STARTED = time.monotonic()


def say(text: str) -> None:
    print(f"[{time.monotonic() - STARTED:6.1f}s] {text}", flush=True)


def wait(what: str, check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.5)
    raise SystemExit(f"FAILED: {what} (after {timeout:.0f}s)")


def documented_permissions() -> dict[str, str]:
    """The permissions the guide's table says an App needs always (name → access)."""
    table = GUIDE.read_text().split("<!-- app-permissions:", 1)[1].split("<!-- /app-perm", 1)[0]
    granted = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 5 and cells[2] == "always":
            title = re.sub(r"\s*\(.*\)$", "", cells[0]).lower().replace(" ", "_")
            granted[title] = cells[1]
    return granted


def unit_argv(unit: Path) -> list[str]:
    """The unit's ExecStart as argv, without its executable's path (`ondemand ...`)."""
    text = unit.read_text().replace("\\\n", " ")
    line = next(x for x in text.splitlines() if x.startswith("ExecStart="))
    argv = shlex.split(line.removeprefix("ExecStart="))
    assert Path(argv[0]).name == "ondemand", argv
    return argv[1:]


def with_option(argv: list[str], option: str, value: str | None) -> list[str]:
    """`argv` with `option`'s value replaced (dropped where `value` is None)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == option:
            skip = True
            continue
        out.append(arg)
    return out + ([option, value] if value is not None else [])


def fresh_database(url: str, name: str) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"postgresql+psycopg://postgres@127.0.0.1:5432/{name}"


def completed(sandbox: str, sha: str, headers: dict[str, str]) -> list[dict[str, Any]]:
    """The commit's completed check runs, oldest first."""
    url = f"{sandbox}/repos/{REPO}/commits/{sha}/check-runs"
    runs = httpx.get(url, headers=headers, timeout=10).json()["check_runs"]
    return sorted((r for r in runs if r["status"] == "completed"), key=lambda r: r["id"])


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.deploy_walkthrough")
    parser.add_argument("--python", required=True, help="the jobs' Python (a CPython 3.10)")
    parser.add_argument("--wheelhouse", help="what the jobs' Python lacks, as wheels")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args(argv)
    work = args.workdir or Path(tempfile.mkdtemp(prefix="ondemand-walkthrough-"))
    work.mkdir(parents=True, exist_ok=True)
    stack = Stack(work)
    try:
        return walk(args, work, stack)
    finally:
        stack.close()
        say(f"logs in {work}")


def walk(args: argparse.Namespace, work: Path, stack: Stack) -> int:
    # The repository: this checkout as a private repository, a pull request on top.
    src, bare = work / "src", work / "repo.git"
    git(work, "clone", "-q", str(ROOT), str(src))
    git(src, "checkout", "-q", "-B", "main")
    git(src, "commit", "-q", "--allow-empty", "-m", "A change to test")
    git(work, "clone", "-q", "--bare", str(src), str(bare))
    head = git(bare, "rev-parse", "main")
    git(bare, "update-ref", "refs/heads/pr", head)
    git(bare, "update-ref", "refs/heads/main", f"{head}~1")

    secret, registration = secrets.token_hex(16), secrets.token_hex(16)
    gh_port, svc_port = free_port(), free_port()
    sandbox, service_url = f"http://127.0.0.1:{gh_port}", f"http://127.0.0.1:{svc_port}"
    proc = stack.start("sandbox", ["sandbox", "--port", str(gh_port), "--log-level", "warning",
                                   "--webhook-url", f"{service_url}/webhook",
                                   "--webhook-secret", secret], {})  # fmt: skip
    stack.wait_http(proc, f"{sandbox}/_sandbox/state")
    admin = SandboxAdmin(sandbox)
    admin.create_user(OWNER, "Organization")
    admin.create_user("maintainer")
    key_pem, public_pem = rsa_keypair()
    app = admin.register_app(APP_ID, public_pem, slug="ondemand")
    installation = int(app["installation_id"])
    documented = documented_permissions()
    admin.set_installation_permissions(installation, documented)
    say(f"App installed with exactly the guide's permissions: {documented}")
    admin.create_repo(OWNER, NAME, str(bare), default_branch="main", private=True)
    admin.set_permission(REPO, "maintainer", "write")
    reader = {"Authorization": f"token {admin.create_token('maintainer')}"}
    pr = int(admin.open_pull(REPO, head="pr", base="main", user="maintainer", title="t")["number"])

    # The service, as deploy/ondemand-service.service starts it, on PostgreSQL.
    key = work / "app.pem"
    key.write_text(key_pem)
    env_file = {
        "ONDEMAND_DATABASE_URL": fresh_database("postgresql://postgres@127.0.0.1:5432/test",
                                                "ondemand_walkthrough"),
        "ONDEMAND_PUBLIC_URL": service_url,
        "ONDEMAND_GITHUB_API_URL": sandbox,
        "ONDEMAND_GITHUB_APP_ID": str(APP_ID),
        "ONDEMAND_GITHUB_PRIVATE_KEY_PATH": str(key),
        "ONDEMAND_WEBHOOK_SECRETS": secret,
        "ONDEMAND_REGISTRATION_TOKENS": registration,
        "ONDEMAND_DEFAULT_BACKENDS": "cpu",
        "ONDEMAND_CHANGES_DIR": str(work / "changes"),
    }  # fmt: skip
    (work / "service.env").write_text("".join(f"{k}={v}\n" for k, v in env_file.items()))
    serve = with_option(unit_argv(ROOT / "deploy" / "ondemand-service.service"), "--port",
                        str(svc_port))  # fmt: skip
    serve = with_option(serve, "--host", "127.0.0.1")
    svc = stack.start("service", serve, env_file)
    stack.wait_http(svc, f"{service_url}/healthz")
    say(f"service up as its unit starts it: ondemand {' '.join(serve)}")

    # A runner, as deploy/ondemand-runner.service starts it, its jobs on the given Python.
    runner = unit_argv(ROOT / "deploy" / "ondemand-runner.service")
    runner = with_option(runner, "--service", service_url)
    runner = with_option(runner, "--backend", "cpu")
    runner = with_option(runner, "--devices", None)
    runner = with_option(runner, "--name", "walkthrough")
    runner = with_option(runner, "--state-dir", str(work / "runner"))
    runner = with_option(runner, "--registration-token-file", None)
    runner = [*with_option(runner, "--job-user", None), "--no-job-user"]
    runner = with_option(runner, "--python", args.python)
    runner += ["--workflows", str(small_cpu_workflows(work / "workflows"))]
    if args.wheelhouse:
        runner += ["--wheelhouse", args.wheelhouse]
    stack.start("runner", runner, {"ONDEMAND_REGISTRATION_TOKEN": registration})
    log = work / "runner.log"
    wait("the runner registers", lambda: (work / "runner" / "runner.json").exists(), 60)
    named = re.compile(r"backend cpu: jobs run on .*")
    chosen = wait("the runner names the jobs' Python", lambda: named.search(log.read_text()), 30)
    say(f"runner up: {chosen.group(0)}")

    # /test gets its verdict.
    admin.comment(REPO, pr, "maintainer", f"/test | {OP}:cpu")
    run = wait("the check run concludes", lambda: completed(sandbox, head, reader), 600)[-1]
    say(f"/test → check run {run['name']}: {run['conclusion']}")
    if run["conclusion"] != "success":
        raise SystemExit(f"FAILED: the verdict is {run['conclusion']}")

    # Contents: read taken away.
    without = {k: v for k, v in documented.items() if k != "contents"}
    admin.set_installation_permissions(installation, without)
    doctor = subprocess.run([sys.executable, "-m", "ondemand", "doctor", "service"],
                            env={**_plain_env(), **env_file}, capture_output=True, text=True,
                            timeout=120)  # fmt: skip
    named = [line for line in doctor.stdout.splitlines() if "Contents: read" in line]
    if doctor.returncode != 1 or not named:
        raise SystemExit(f"FAILED: the doctor did not name it:\n{doctor.stdout}")
    say(f"doctor (exit {doctor.returncode}): {named[0].strip()}")
    _restart(stack, svc, serve, env_file, service_url)
    started = wait("the service says so at start-up",
                   lambda: [x for x in (work / "service.log").read_text().splitlines()
                            if "lacks Contents: read" in x], 30)  # fmt: skip
    say(f"service at start-up: {started[0].strip()[:160]}")
    admin.comment(REPO, pr, "maintainer", f"/test | {OP}:cpu --no-bench")
    reply = wait("the pull request is told", lambda: [
        c for c in admin.comments(REPO, pr) if "Contents: read" in c["body"]], 60)  # fmt: skip
    told = [x for x in reply[0]["body"].splitlines() if x.strip() and "<!--" not in x]
    say(f"pull request told: {told[0][:200]}")

    # Granted again: the parked command runs.
    admin.set_installation_permissions(installation, documented, user=OWNER)
    # (GitHub lists the newest check run of each name: the parked job's replaces the first's.)
    runs = wait("the parked /test gets its job and verdict",
                lambda: [r for r in completed(sandbox, head, reader) if r["id"] != run["id"]],
                600)  # fmt: skip
    say(f"granted again: the parked /test ran: check run {runs[-1]['conclusion']}; "
        "no delivery lost")  # fmt: skip
    return 0 if runs[-1]["conclusion"] == "success" else 1


def _plain_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("ONDEMAND_")}


def _restart(stack: Stack, old: Any, argv: list[str], env: dict[str, str], url: str) -> None:
    old.popen.terminate()
    old.popen.wait(timeout=30)
    stack.procs.remove(old)
    proc = stack.start("service", argv, env)
    stack.wait_http(proc, f"{url}/healthz")
    say("service restarted")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
