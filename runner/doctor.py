"""`ondemand doctor runner`: this runner host as its jobs will meet it. It takes the daemon's
own options (`ondemand runner`'s), so the same command line checks what the unit would run:
the service and this runner's token, each backend's job Python with its device and versions,
the wheelhouse, git's way to the repositories, the job user, and whether its jobs'
infrastructure errors drained it (which jobs, which errors)."""

from __future__ import annotations

import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import httpx

from ondemand.doctor import Finding, exit_status, fail, ok, render, warn
from ondemand.git import GitError, git
from runner.cli import REGISTRATION_TOKEN_ENV, daemon_parser, read_options
from runner.daemon.cores import CorePlan, span
from runner.daemon.fitness import DRAIN_FILE, read_drain
from runner.daemon.health import run_device_check
from runner.environment import interpreter
from runner.environment.interpreter import Interpreter, InterpreterError
from runner.environment.probe import environment_info
from runner.environment.pyenv import PackageSources
from runner.job.sandboxing import JailError, check_jail, jail_for_host, visible_devices
from runner.link.client import ServiceClient, ServiceUnavailable, Unauthorized
from runner.link.credentials import CredentialFile
from workflows.spec import WorkflowSpec

GIT_TIMEOUT_S = 20
# What git says when it reached the server and was asked who it is: reachable.
ASKED_FOR_CREDENTIALS = ("Authentication failed", "could not read Username", "terminal prompts")


def service_findings(
    url: str, state_dir: Path, registration_token: str | None
) -> tuple[list[Finding], list[str]]:
    """The service answers, and takes this runner's token (or it has a registration token);
    also the repositories the service last tested on this runner's backends."""
    try:
        answer = httpx.get(f"{url}/healthz", timeout=10)
    except httpx.HTTPError as exc:
        return [fail(
            "service", f"{url} does not answer: {type(exc).__name__}: {exc}",
            "check --service (ONDEMAND_SERVICE_URL), DNS, and a proxy (https_proxy) where the "
            "host needs one",
        )], []  # fmt: skip
    if answer.status_code != 200:
        return [fail("service", f"{url}/healthz answered {answer.status_code}", "")], []
    found = [ok("service", f"{url} answers")]
    creds = CredentialFile(state_dir / "runner.json", url).load()
    if creds is None:
        if registration_token:
            found.append(ok("runner token", "not registered yet; a registration token is set"))
        else:
            found.append(fail(
                "runner token", f"none in {state_dir / 'runner.json'} and no registration token",
                f"set {REGISTRATION_TOKEN_ENV} or --registration-token-file to one of the "
                "service's ONDEMAND_REGISTRATION_TOKENS",
            ))  # fmt: skip
        return found, []
    client = ServiceClient(url, creds.token, timeout_s=10)
    try:
        me = client.me()
    except Unauthorized:
        return [*found, fail(
            "runner token", f"the service refused runner {creds.runner_id}'s token (it was "
            "removed, or unseen too long)",
            f"delete {state_dir / 'runner.json'} and give a registration token: the runner "
            "registers again",
        )], []  # fmt: skip
    except ServiceUnavailable as exc:
        return [*found, fail("runner token", str(exc), "")], []
    finally:
        client.close()
    backends = ", ".join(me.get("backends", []))
    found.append(ok("runner token", f"runner {me['runner_id']} ({me['name']}) serving {backends}"))
    return found, [str(u) for u in me.get("repositories", [])]


def drain_findings(state_dir: Path) -> list[Finding]:
    """Whether the daemon of `state_dir` is drained, and by which jobs' errors."""
    drain = read_drain(state_dir / DRAIN_FILE)
    if drain is None:
        return [ok("drained", "no: its jobs' errors have not drained it")]
    since = datetime.fromtimestamp(drain.since, UTC).strftime("%Y-%m-%d %H:%M UTC")
    return [fail(
        "drained", f"since {since}, {drain.reason}",
        "fix what the errors say; it claims again once its environment check passes (every "
        f"--check-interval), or at once after `ondemand runner --undrain --state-dir {state_dir}`",
    )]  # fmt: skip


def slot_findings(devices: list[str | None], plan: CorePlan) -> list[Finding]:
    """The runner's slots: each one's device and the CPU cores its steps are pinned to, and
    why they are not pinned where more than one slot shares every core."""
    slots = "; ".join(plan.describe(devices))
    if plan.unpinned and len(devices) > 1:
        return [warn(
            "slots", f"{len(devices)}: {slots}: {plan.unpinned}",
            "give each slot two cores or more (fewer slots, or --cores-per-slot N): a "
            "neighbour's compile then cannot take a timing process's core (docs/runner.md)",
        )]  # fmt: skip
    spare = f"; spare cores {span(plan.spare)}" if plan.spare and not plan.unpinned else ""
    return [ok("slots", f"{len(devices)}: {slots}{spare}")]


def backend_findings(
    workflow: WorkflowSpec, given: Path | None, home: Path, device: str | None
) -> tuple[list[Finding], Interpreter | None]:
    """The backend's job Python, its device check run with it, and what it has."""
    name = workflow.name
    modules = workflow.python_env.host_modules
    try:
        python, how = interpreter.find(modules, given)
    except InterpreterError as exc:
        return [fail(
            f"python ({name})", str(exc),
            f"install the vendor's torch, or give its Python: --python {name}=PATH "
            "(ONDEMAND_JOB_PYTHON)",
        )], None  # fmt: skip
    found = [ok(f"python ({name})", f"{python.describe()}, {how}")]
    visible = visible_devices(workflow.visible_devices_var, device)
    home.mkdir(parents=True, exist_ok=True)
    reason = run_device_check(
        workflow, home=home, visible_devices=visible, python=python.executable
    )
    if reason is None:
        found.append(ok(f"device ({name})", "the workflow's device check passes"))
    else:
        found.append(fail(
            f"device ({name})", reason,
            "check the driver and device nodes, and that the job user may open them "
            "(groups video, render)",
        ))  # fmt: skip
    info = environment_info(
        python.executable, dict(os.environ), workflow, runner_name=None, runner_version=None,
        cwd=home,
    )  # fmt: skip
    versions = [("torch", info.torch), ("triton", info.triton), *info.packages.items()]
    stack = [f"{name} {version}" for name, version in versions if version]
    found.append(ok(f"versions ({name})", ", ".join(stack) + f" · {info.device_name}"))
    return found, python


def package_findings(sources: PackageSources) -> list[Finding]:
    """Where a job's missing requirements come from."""
    if sources.wheelhouse is not None:
        wheels = sorted(sources.wheelhouse.glob("*.whl")) if sources.wheelhouse.is_dir() else []
        if not sources.wheelhouse.is_dir():
            return [fail("wheelhouse", f"{sources.wheelhouse} is not a directory", "")]
        if not wheels:
            return [
                warn(
                    "wheelhouse",
                    f"{sources.wheelhouse} holds no wheel",
                    "put the wheels of what repositories need and the host lacks there",
                )
            ]
        return [ok("wheelhouse", f"{sources.wheelhouse}: {len(wheels)} wheels")]
    if sources.index_url:
        return [ok("packages", f"from the index {sources.index_url}")]
    return [warn(
        "packages", "no wheelhouse and no index: what the host lacks comes from pip's default "
        "index", "on a host without it, set --wheelhouse DIR (ONDEMAND_WHEELHOUSE)",
    )]  # fmt: skip


def git_findings(urls: list[str]) -> list[Finding]:
    """Whether git reaches each repository (a request for credentials counts: it reached
    it). The runner's git reads the system's configuration: proxies and `insteadOf` mirrors."""
    if not urls:
        return [warn(
            "git", "no repository to try yet (no job on these backends)",
            "pass --git-url URL of a repository the runner will test",
        )]  # fmt: skip
    found: list[Finding] = []
    for url in urls:
        try:
            git(["ls-remote", "--heads", url], timeout=GIT_TIMEOUT_S)
        except GitError as exc:
            if any(words in str(exc) for words in ASKED_FOR_CREDENTIALS):
                found.append(
                    ok(
                        "git",
                        f"{url} reached (it asks for credentials: each job of a "
                        "private repository brings a token)",
                    )
                )
                continue
            found.append(fail(
                "git", f"{url}: {exc}",
                "let git through: https_proxy in the runner's environment, or a mirror with "
                "`git config --system url.MIRROR.insteadOf https://github.com/`",
            ))  # fmt: skip
            continue
        found.append(ok("git", f"{url} reached"))
    return found


def job_user_findings(job_user: str | None, pythons: list[Interpreter]) -> list[Finding]:
    """The job user exists and can run the runner's Python and each job Python."""
    if job_user is None or os.geteuid() != 0:
        how = "as the runner's own user" if job_user is None else "as the runner (not root)"
        return [warn("job user", f"steps run {how}", "run the runner as root with --job-user")]
    try:
        jail = jail_for_host(job_user, True)
    except JailError as exc:
        return [fail("job user", str(exc), f"create it: useradd --system {job_user}")]
    if jail is None:
        return [fail("job user", "no unshare on this host", "install util-linux")]
    try:
        for python in {sys.executable, *(str(p.executable) for p in pythons)}:
            check_jail(jail, python)
    except JailError as exc:
        return [fail("job user", str(exc), "")]
    return [ok("job user", f"{job_user} runs every Python the jobs use")]


def main(argv: list[str]) -> int:
    parser = daemon_parser()
    parser.prog = "ondemand doctor runner"
    parser.description = (
        "Check this runner host with the options `ondemand runner` would start with. Exit 1 "
        "when a check fails."
    )
    parser.add_argument(
        "--git-url", action="append", default=[], help="a repository to check git reaches"
    )
    args = parser.parse_args(argv)
    # The daemon's own checks of its options: what it would refuse, it is told here the same way.
    options = read_options(parser, args, argv)
    for problem in options.problems:
        print(f"ondemand doctor runner: {' '.join(problem.split())}", file=sys.stderr)
    if options.problems:
        return 2
    workflows, chosen, pythons = options.workflows, options.backends, options.pythons
    token = options.token
    url = args.service.rstrip("/")
    findings, repositories = service_findings(url, args.state_dir, token)
    findings += drain_findings(args.state_dir)
    findings += slot_findings(options.devices, options.cores)
    used: list[Interpreter] = []
    device = args.devices.split(",")[0].strip() if args.devices else None
    with tempfile.TemporaryDirectory(prefix="ondemand-doctor-") as home:
        for backend in chosen:
            found, python = backend_findings(
                workflows[backend], pythons.get(backend), Path(home) / backend, device
            )
            findings += found
            used += [python] if python is not None else []
    findings += package_findings(PackageSources.from_args(args))
    findings += git_findings(list(dict.fromkeys([*args.git_url, *repositories])))
    findings += job_user_findings(None if args.no_job_user else args.job_user, used)
    print(render(f"ondemand doctor runner ({args.name})", findings))
    return exit_status(findings)
