"""`ondemand demo`: the whole loop on this machine, as a maintainer would see it.

Starts the GitHub sandbox, the service (SQLite) and a runner, each as a real process; makes a
sandbox repository backed by a bare clone of this checkout and a pull request based on the
current commit that changes a kernel's tuning on top of it (so the report shows before → after;
`--no-change`: the commit itself); comments `/test | OP:BACKEND`; then shows the
acknowledgement, the queue and running states and the final result comment, commit status and
job page as they happen (`--keep` leaves it all running and prints the pull request's page).
Exit status: 0 when the verdict is a pass, 1 when it is not, 2 when the demo itself broke.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from devtools.stack import Proc, Stack, free_port
from devtools.terminal import print_comment
from sandbox.client import SandboxAdmin

OWNER, REPO_NAME = "demo", "kernels"
# The change the demo's pull request makes on top of the commit it tests, so the report shows
# before → after: the interpreter's backward programs take twice the elements. (path, the line
# as it is, the line as the PR makes it, the commit message)
KERNEL_CHANGE = (
    "kernels/backends/_cpu/heuristics.py",
    "    backward_elements=32768,\n",
    "    backward_elements=65536,\n",
    "Interpreter: twice the elements per backward program",
)
REPO = f"{OWNER}/{REPO_NAME}"
MAINTAINER = "maintainer"
_MD_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>])")
BOT = "ondemand-bot"


@dataclass
class Options:
    op: str
    backend: str
    repo: Path
    ref: str
    workdir: Path
    keep: bool
    timeout: float
    workflows: Path | None
    json_out: Path | None
    change: bool = True
    extra: list[str] = field(default_factory=list)
    runner_args: list[str] = field(default_factory=list)


def parse_args(argv: list[str]) -> Options:
    parser = argparse.ArgumentParser(
        prog="ondemand demo",
        description="Sandbox + service + a runner on this machine; comments /test on a pull "
        "request of this checkout and shows the result as GitHub would.",
    )
    parser.add_argument("--op", default="adaptive_max_pool3d_backward", help="operator to test")
    parser.add_argument("--backend", default="cpu", help="backend (cpu, nvidia, mthreads)")
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="git checkout to test")
    parser.add_argument("--ref", default="HEAD", help="commit of the pull request's head")
    parser.add_argument("--workdir", type=Path, help="where logs, database and clones go")
    parser.add_argument("--keep", action="store_true", help="leave everything running (Ctrl-C)")
    parser.add_argument(
        "--timeout", type=float, default=900.0, help="seconds to wait for the verdict"
    )
    parser.add_argument("--workflows", type=Path, help="the runner's workflow directory")
    parser.add_argument("--json", type=Path, dest="json_out", help="write the outcome as JSON")
    parser.add_argument(
        "--no-change",
        dest="change",
        action="store_false",
        help="open the pull request at --ref itself, with no kernel change on top",
    )
    parser.add_argument(
        "--flags", default="", help="extra command flags, e.g. '--no-compare --no-bench'"
    )
    parser.add_argument(
        "--runner-arg",
        action="append",
        default=[],
        dest="runner_args",
        help="an option for the runner, e.g. --runner-arg=--python=/usr/bin/python3.10 (repeat)",
    )
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(".ondemand") / f"demo-{time.strftime('%Y%m%d-%H%M%S')}"
    return Options(
        op=args.op,
        backend=args.backend,
        repo=args.repo.resolve(),
        ref=args.ref,
        workdir=workdir.resolve(),
        keep=args.keep,
        timeout=args.timeout,
        workflows=args.workflows.resolve() if args.workflows else None,
        json_out=args.json_out,
        change=args.change,
        extra=args.flags.split(),
        runner_args=args.runner_args,
    )


def git(*argv: str, cwd: Path) -> str:
    return subprocess.run(
        ["git", *argv], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout.strip()


def main(argv: list[str]) -> int:
    opts = parse_args(argv)
    console = Console(highlight=False)
    opts.workdir.mkdir(parents=True, exist_ok=True)
    stack = Stack(opts.workdir)
    # SIGTERM stops the demo as Ctrl-C does: everything it started goes with it. Ctrl-C's own
    # handler is set too: a shell that starts a command in the background leaves SIGINT
    # ignored, and Python keeps an ignored SIGINT ignored.
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    try:
        return run_demo(opts, stack, console)
    except KeyboardInterrupt:
        console.print("\n[yellow]interrupted: stopping everything[/]")
        return 130
    except (RuntimeError, subprocess.CalledProcessError, TimeoutError) as exc:
        console.print(f"[red]demo failed:[/] {exc}")
        return 2
    finally:
        stack.close()
        console.print(f"[dim]logs: {opts.workdir}[/]")


def run_demo(opts: Options, stack: Stack, console: Console) -> int:
    sha = git("rev-parse", "--verify", f"{opts.ref}^{{commit}}", cwd=opts.repo)
    bare = opts.workdir / "repo.git"
    if not bare.exists():
        git("clone", "--quiet", "--bare", str(opts.repo), str(bare), cwd=opts.workdir)
    git("fetch", "--quiet", str(opts.repo), f"+{sha}:refs/heads/demo-head", cwd=bare)
    base = _base_branch(bare)
    head, change = sha, None
    if opts.change:
        head, change = _kernel_change(bare, sha)
        if head != sha:  # the PR: the tested commit as its base, the change on top
            git("update-ref", "refs/heads/demo-base", sha, cwd=bare)
            git("update-ref", "refs/heads/demo-head", head, cwd=bare)
            base = "demo-base"

    secret, registration = secrets.token_hex(16), secrets.token_hex(16)
    sandbox_port, service_port = free_port(), free_port()
    sandbox_url = f"http://127.0.0.1:{sandbox_port}"
    service_url = f"http://127.0.0.1:{service_port}"

    console.print(f"[bold]ondemand demo[/]: {opts.op} on {opts.backend}, commit {sha[:12]}")
    sandbox = stack.start(
        "sandbox",
        [
            "sandbox",
            "--port",
            str(sandbox_port),
            "--log-level",
            "warning",
            "--webhook-url",
            f"{service_url}/webhook",
            "--webhook-secret",
            secret,
        ],
        {},
    )
    stack.wait_http(sandbox, f"{sandbox_url}/_sandbox/state")
    admin = SandboxAdmin(sandbox_url)
    admin.create_user(BOT, "Bot")
    bot_token = admin.create_token(BOT)
    admin.create_user(MAINTAINER)
    admin.create_repo(OWNER, REPO_NAME, str(bare), default_branch=base)
    admin.set_permission(REPO, MAINTAINER, "write")
    console.print(f"  sandbox GitHub     {sandbox_url}  (repository {REPO})")

    service_env = {
        "ONDEMAND_DATABASE_URL": f"sqlite:///{opts.workdir / 'ondemand.db'}",
        "ONDEMAND_CHANGES_DIR": str(opts.workdir / "changes"),
        "ONDEMAND_GITHUB_API_URL": sandbox_url,
        "ONDEMAND_GITHUB_TOKEN": bot_token,
        "ONDEMAND_WEBHOOK_SECRETS": secret,
        "ONDEMAND_REGISTRATION_TOKENS": registration,
        "ONDEMAND_PUBLIC_URL": service_url,
        "ONDEMAND_DEFAULT_BACKENDS": opts.backend,
        "ONDEMAND_BOT_LOGIN": BOT,
    }
    service = stack.start(
        "service",
        ["serve", "--port", str(service_port), "--log-level", "warning", "--local-trial"],
        service_env,
    )
    stack.wait_http(service, f"{service_url}/healthz")
    console.print(f"  service            {service_url}  (dashboard)")

    runner_argv = [
        "runner",
        "--service",
        service_url,
        "--backend",
        opts.backend,
        "--name",
        f"demo-{opts.backend}",
        "--state-dir",
        str(opts.workdir / "runner"),
        # The demo's steps run as whoever runs the demo: a deployed runner drops to its job user.
        "--no-job-user",
    ]
    if opts.workflows:
        runner_argv += ["--workflows", str(opts.workflows)]
    runner_argv += opts.runner_args
    runner = stack.start("runner", runner_argv, {"ONDEMAND_REGISTRATION_TOKEN": registration})
    _wait_registered(runner, opts.workdir / "runner" / "runner.json")
    console.print(f"  runner             {opts.backend}  (log {runner.log})")

    title = change or f"Demo: test {opts.op}"
    body = f"Changes `{KERNEL_CHANGE[0]}`: {KERNEL_CHANGE[3].lower()}." if change else ""
    pr = admin.open_pull(REPO, head="demo-head", base=base, user=MAINTAINER, title=title, body=body)
    number = int(pr["number"])
    command = " ".join([f"/test | {opts.op}:{opts.backend}", *opts.extra])
    admin.comment(REPO, number, MAINTAINER, command)
    console.print(
        f"  pull request #{number}, head {head[:12]}" + (f" ({change})" if change else "")
    )
    console.print(f"  pull request page  {pr['html_url']}")
    console.print(f"  @{MAINTAINER} commented: {command}\n")

    outcome = watch(admin, number, head, opts, console, procs=stack)
    outcome["base_sha"] = sha
    outcome["pull_request_url"] = pr["html_url"]
    outcome["pids"] = [p.popen.pid for p in stack.procs]
    if opts.json_out:
        opts.json_out.write_text(json.dumps(outcome, indent=2))
    verdict = 0 if outcome["verdict"] == "success" else 1
    if opts.keep:
        console.print("\n[bold]--keep[/]: everything keeps running")
        console.print(f"  pull request     {pr['html_url']}")
        console.print(f"  dashboard        {service_url}/")
        console.print(f"  job page         {outcome['status'].get('target_url')}")
        console.print(f"  sandbox state    {sandbox_url}/_sandbox/state")
        console.print(f"  PR comments API  {sandbox_url}/repos/{REPO}/issues/{number}/comments")
        console.print("Ctrl-C stops it", soft_wrap=True)
        try:
            while all(p.alive() for p in stack.procs):
                time.sleep(0.5)
        except KeyboardInterrupt:
            console.print("\nstopping")
    return verdict


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _wait_registered(runner: Proc, credentials: Path, timeout: float = 60.0) -> None:
    """The runner writes its credentials once the service has registered it."""
    deadline = time.monotonic() + timeout
    while not credentials.exists():
        if not runner.alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the runner did not register:\n{runner.log_tail()}")
        time.sleep(0.1)
    time.sleep(0.5)  # its first claim marks it online


def _kernel_change(bare: Path, sha: str) -> tuple[str, str | None]:
    """A commit on top of `sha` that makes KERNEL_CHANGE, written straight into the bare
    repository (the checkout is left alone): (its SHA, its message); (`sha`, None) when the
    file or its line is not there (another repository, a later rewrite)."""
    path, old, new, message = KERNEL_CHANGE
    shown = subprocess.run(
        ["git", "show", f"{sha}:{path}"], cwd=bare, capture_output=True, text=True, check=False
    )
    if shown.returncode != 0 or shown.stdout.count(old) != 1:
        return sha, None
    blob = subprocess.run(
        ["git", "hash-object", "-w", "--stdin"],
        cwd=bare,
        input=shown.stdout.replace(old, new),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    env = {
        **os.environ,
        "GIT_INDEX_FILE": str(bare / "demo-index"),
        "GIT_AUTHOR_NAME": MAINTAINER,
        "GIT_AUTHOR_EMAIL": f"{MAINTAINER}@example.org",
        "GIT_COMMITTER_NAME": MAINTAINER,
        "GIT_COMMITTER_EMAIL": f"{MAINTAINER}@example.org",
    }

    def run(*argv: str) -> str:
        done = subprocess.run(
            ["git", *argv], cwd=bare, env=env, capture_output=True, text=True, check=True
        )
        return done.stdout.strip()

    run("read-tree", sha)
    run("update-index", "--cacheinfo", f"100644,{blob},{path}")
    tree = run("write-tree")
    (bare / "demo-index").unlink(missing_ok=True)
    return run("commit-tree", tree, "-p", sha, "-m", message), message


def _base_branch(bare: Path) -> str:
    heads = git("for-each-ref", "--format=%(refname:short)", "refs/heads", cwd=bare).split()
    for name in ("main", "master"):
        if name in heads:
            return name
    return next(h for h in heads if h != "demo-head") if len(heads) > 1 else "demo-head"


def watch(
    admin: SandboxAdmin, number: int, sha: str, opts: Options, console: Console, procs: Stack
) -> dict[str, Any]:
    """Print each change the bot makes on the pull request until the status is final."""
    context = f"ondemand/{opts.op}:{opts.backend}"
    deadline = time.monotonic() + opts.timeout
    seen_bodies: dict[int, str] = {}
    seen_reactions: set[str] = set()
    last_status: tuple[str, str] | None = None
    started = time.monotonic()
    while time.monotonic() < deadline:
        for proc in procs.procs:
            if not proc.alive():
                raise RuntimeError(f"{proc.name} exited:\n{proc.log_tail()}")
        comments = admin.comments(REPO, number)
        for c in comments:
            if c["user"] == MAINTAINER:
                for r in c.get("reactions", []):
                    key = r.get("content", "")
                    if key not in seen_reactions:
                        seen_reactions.add(key)
                        _event(console, started, f"reaction :{key}: on the /test comment")
            elif seen_bodies.get(c["id"]) != c["body"]:
                verb = "updated" if c["id"] in seen_bodies else "commented"
                seen_bodies[c["id"]] = c["body"]
                _event(console, started, f"bot {verb}: {_headline(c['body'])}")
        statuses = [s for s in admin.statuses(REPO, sha) if s["context"] == context]
        if statuses:
            current = (statuses[-1]["state"], statuses[-1]["description"])
            if current != last_status:
                last_status = current
                _event(console, started, f"status {context}: {current[0]} — {current[1]}")
            if current[0] in ("success", "failure", "error") and _comment_final(comments, context):
                return _finish(console, comments, statuses[-1], sha, context)
        time.sleep(0.5)
    raise TimeoutError(f"no final status for {context} within {opts.timeout:.0f}s")


def _result_comment(comments: list[dict[str, Any]], context: str) -> dict[str, Any] | None:
    marker = f"<!-- ondemand:{context.removeprefix('ondemand/')} -->"
    return next((c for c in comments if c["user"] == BOT and marker in c["body"]), None)


def _comment_final(comments: list[dict[str, Any]], context: str) -> bool:
    """The result comment has left the queued and running states (it may trail the status)."""
    comment = _result_comment(comments, context)
    return comment is not None and not _headline(comment["body"]).startswith(("⏳", "🏃"))


def _finish(
    console: Console, comments: list[dict[str, Any]], status: dict[str, Any], sha: str, ctx: str
) -> dict[str, Any]:
    bot_comments = [c for c in comments if c["user"] == BOT]
    result = _result_comment(comments, ctx)
    console.rule("the result comment on the pull request")
    if result:
        print_comment(console, result["body"])
    console.rule()
    console.print(f"commit status  {ctx}: [bold]{status['state']}[/] — {status['description']}")
    console.print(f"job page       {status.get('target_url')}")
    return {
        "verdict": status["state"],
        "sha": sha,
        "status": status,
        "comment": result["body"] if result else None,
        "comments": [c["body"] for c in bot_comments],
    }


def _headline(body: str) -> str:
    for line in body.splitlines():
        text = line.strip()
        if text and not text.startswith("<!--"):
            return _MD_ESCAPE.sub(r"\1", text.lstrip("#").strip())[:120]
    return "(empty)"


def _event(console: Console, started: float, text: str) -> None:
    console.print(f"[dim]{time.monotonic() - started:6.1f}s[/]  {text}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
