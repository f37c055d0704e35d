"""`ondemand runner` (the daemon) and `ondemand run` (one workflow here), as argv → exit status.

The daemon's settings are its options (most with an environment variable too). `read_options`
checks all of them before anything starts, as `ondemand doctor runner` does: each problem is
one line naming the option or variable the operator typed, what is wrong and the fix; exit 2."""

from __future__ import annotations

import argparse
import logging
import os
import pwd
import socket
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ondemand.options import (
    Number,
    OneLineParser,
    directory_problem,
    one_line,
    read_file,
    url_problem,
)
from runner import local
from runner.daemon.config import DaemonConfig
from runner.daemon.cores import AUTO, OFF, CorePlan, CoresPerSlot, host_cores, partition
from runner.daemon.fitness import DEFAULT_DRAIN_AFTER, MAX_DRAIN_AFTER, undrain
from runner.daemon.pool import serve
from runner.environment import interpreter
from runner.environment.pyenv import PackageSources
from runner.job.logstream import DEFAULT_LIMIT, MIN_LIMIT
from runner.link.credentials import CredentialFile
from workflows.spec import WorkflowError, WorkflowSpec, backend_names, load_workflows

REGISTRATION_TOKEN_ENV = "ONDEMAND_REGISTRATION_TOKEN"
DEFAULT_JOB_USER = "ondemand-job"
BACKENDS_ENV = "ONDEMAND_RUNNER_BACKENDS"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")


@dataclass(frozen=True)
class Value:
    """What an option's value must be, checked after parsing whichever way it came (the option
    or its environment variable), so that a problem names what was typed. The settings test
    makes wrong values of each kind."""

    kind: str  # url, directory, state (a directory it makes), workflows, program, token_file
    env: str | None = None
    fix: str = ""


# Every option whose value is more than free text or a number (a `Number` type) or a choice.
VALUES = {
    "service": Value("url", "ONDEMAND_SERVICE_URL", "give the service's https://HOST[/PATH]"),
    "index_url": Value("url", "ONDEMAND_INDEX_URL", "give the index's https://HOST/PATH"),
    "state_dir": Value(
        "state", "ONDEMAND_RUNNER_STATE", "name a directory the runner's user may make and write"
    ),
    "work_dir": Value("state", None, "name a directory the runner's user may make and write"),
    "workflows": Value("workflows", None, "name a directory of workflow files, or leave it out"),
    "wheelhouse": Value("directory", "ONDEMAND_WHEELHOUSE", "name a directory of wheels"),
    "python": Value(
        "program", interpreter.ENV, "name the Python with the vendor's torch ([BACKEND=]PATH)"
    ),
    "registration_token_file": Value(
        "token_file", None, "put one of the service's ONDEMAND_REGISTRATION_TOKENS in it (0600)"
    ),
}
# Free text (or checked against the workflows: backends): nothing to refuse by its form.
TEXT = {"backends": BACKENDS_ENV, "labels": None, "name": "ONDEMAND_RUNNER_NAME",
        "devices": None, "job_user": None}  # fmt: skip


def daemon_parser() -> argparse.ArgumentParser:
    """`ondemand runner`'s options, in the order its help lists them."""
    parser = OneLineParser(
        prog="ondemand runner",
        description="Claim jobs from the service and run them on this machine's devices.",
        epilog=f"The registration token comes from ${REGISTRATION_TOKEN_ENV} or "
        "--registration-token-file (never the command line: it would show in ps).",
    )
    _identity_options(parser)
    _state_options(parser)
    _pace_options(parser)
    _job_options(parser)
    _log_and_drain_options(parser)
    return parser


def _identity_options(parser: argparse.ArgumentParser) -> None:
    """Which service, what this runner serves and is called, and its slots and devices."""
    env = os.environ.get
    parser.add_argument("--service", default=env("ONDEMAND_SERVICE_URL"), help="service base URL")
    parser.add_argument(
        "--backend",
        action="append",
        dest="backends",
        help="backend to serve (repeat; default $ONDEMAND_RUNNER_BACKENDS, comma-separated)",
    )
    parser.add_argument(
        "--label", action="append", dest="labels", default=[], help="default: the workflows'"
    )
    parser.add_argument(
        "--name", default=env("ONDEMAND_RUNNER_NAME") or socket.gethostname(), help="in reports"
    )
    parser.add_argument("--slots", type=Number(int, 1), help="jobs at once (default 1)")
    parser.add_argument(
        "--devices",
        help="comma-separated device ids, one slot each, exported to the job as the backend's "
        "visible-devices variable (e.g. 0,1,2,3)",
    )
    parser.add_argument(
        "--cores-per-slot",
        type=CoresPerSlot(),
        default=AUTO,
        help="CPU cores each slot's steps are pinned to (auto: the host's cores divided evenly, "
        "when each slot gets at least two; off: unpinned; docs/runner.md)",
    )


def _state_options(parser: argparse.ArgumentParser) -> None:
    """Where the runner keeps its state and work, and what it reads at start."""
    state = os.environ.get("ONDEMAND_RUNNER_STATE", ".ondemand-runner")
    parser.add_argument("--state-dir", type=Path, default=Path(state), help="token, caches")
    parser.add_argument("--work-dir", type=Path, default=None, help="default: STATE_DIR/work")
    parser.add_argument("--registration-token-file", type=Path)
    parser.add_argument("--workflows", type=Path, help="directory of workflow YAML files")


def _pace_options(parser: argparse.ArgumentParser) -> None:
    """How long it waits: the claim's long-poll, device checks, back-off, a stopping job."""
    seconds, positive = Number(float, 0), Number(float, 0, above=True)
    parser.add_argument("--poll-seconds", type=positive, default=25.0, help="claim long-poll wait")
    parser.add_argument("--check-interval", type=seconds, default=60.0, help="device check reuse")
    parser.add_argument("--backoff-max", type=positive, default=30.0)
    parser.add_argument("--grace-seconds", type=seconds, default=10.0, help="SIGTERM → SIGKILL")


def _job_options(parser: argparse.ArgumentParser) -> None:
    """How a job runs: isolated, once, with the compile cache, as which user, on which Python
    and package sources."""
    parser.add_argument("--no-network-isolation", action="store_true")
    parser.add_argument(
        "--ephemeral",
        action="store_true",
        help="run one job, then deregister and exit (a machine or container made for one job; "
        "one slot)",
    )
    parser.add_argument(
        "--no-compile-cache",
        action="store_true",
        help="no shared compile cache: every job compiles its kernels afresh (docs/runner.md)",
    )
    parser.add_argument(
        "--job-user",
        default=DEFAULT_JOB_USER,
        help="as root: the unprivileged user steps run as, in their own namespaces "
        f"(default {DEFAULT_JOB_USER}; it must exist)",
    )
    parser.add_argument(
        "--no-job-user",
        action="store_true",
        help="run steps as the runner's own user (root: for a trial on a machine of your own)",
    )
    interpreter.add_argument(parser)
    PackageSources.add_arguments(parser)


def _log_and_drain_options(parser: argparse.ArgumentParser) -> None:
    """The job logs' sizes, when the runner drains itself, and its own log level."""
    parser.add_argument(
        "--log-max-bytes",
        type=Number(int, MIN_LIMIT),
        default=DEFAULT_LIMIT,
        help="one job's log at most (its head and tail kept, the middle cut; keep it at most "
        "the service's ONDEMAND_LOG_MAX_BYTES)",
    )
    parser.add_argument(
        "--keep-log-bytes",
        type=Number(int, 0),
        default=1024**3,
        help="the job logs kept in WORK/logs, newest first, in all",
    )
    parser.add_argument(
        "--drain-after",
        type=int,
        default=DEFAULT_DRAIN_AFTER,
        help="stop claiming after this many jobs in a row lost to this runner's own "
        f"infrastructure (checkout, environment, a crash; default {DEFAULT_DRAIN_AFTER}, 0: "
        "never); it claims again once its environment check passes or it is undrained",
    )
    parser.add_argument(
        "--undrain",
        action="store_true",
        help="undrain the runner of --state-dir (running or not) and exit",
    )
    parser.add_argument("--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS)


@dataclass
class Options:
    """The daemon's options as it runs with them, and every problem found in them."""

    problems: list[str] = field(default_factory=list)
    backends: list[str] = field(default_factory=list)
    workflows: Mapping[str, WorkflowSpec] = field(default_factory=dict)
    pythons: dict[str, Path] = field(default_factory=dict)
    devices: list[str | None] = field(default_factory=lambda: [None])
    cores: CorePlan = field(default_factory=lambda: CorePlan((), ()))
    token: str | None = None


def given(parser: argparse.ArgumentParser, dest: str, argv: Sequence[str]) -> str:
    """What the operator typed for option `dest`: the option when it is on the command line,
    else its environment variable when that is set, else the option (its default)."""
    action = next(a for a in parser._actions if a.dest == dest)
    flags = action.option_strings
    if any(arg in flags or arg.split("=", 1)[0] in flags for arg in argv):
        return flags[0]
    env = (VALUES[dest].env if dest in VALUES else TEXT.get(dest)) or ""
    return env if env and os.environ.get(env, "").strip() else flags[0]


def read_options(
    parser: argparse.ArgumentParser, args: argparse.Namespace, argv: Sequence[str]
) -> Options:
    """Check every option (and its variable) before anything starts. The registration token
    is read only when it will be used: with no credentials in STATE_DIR/runner.json for this
    service; a runner registered already starts whatever its token file says."""
    out = Options()
    say = out.problems.append
    out.backends = args.backends or [
        b.strip() for b in os.environ.get(BACKENDS_ENV, "").split(",") if b.strip()
    ]
    if not args.service:
        say("--service (or ONDEMAND_SERVICE_URL) is not set: give the service's URL")
    if not out.backends:
        say(f"--backend (or {BACKENDS_ENV}) is not set: give the backends this runner serves")
    if args.devices and args.slots:
        say("--slots and --devices: give --slots or --devices, not both (a slot per device)")
    out.devices = (
        [d.strip() for d in args.devices.split(",") if d.strip()]
        if args.devices
        else [None] * (args.slots or 1)
    )
    if args.ephemeral and len(out.devices) != 1:
        say("--ephemeral runs one job: give one slot (no --slots or --devices beyond one)")
    out.cores = partition(host_cores(), len(out.devices), args.cores_per_slot)
    if args.cores_per_slot not in (AUTO, OFF) and out.cores.unpinned:
        why = out.cores.unpinned
        say(f"--cores-per-slot={args.cores_per_slot}: {why}; give fewer, {AUTO} or {OFF}")
    for dest, value in VALUES.items():
        raw = getattr(args, dest, None)
        if raw in (None, []) or value.kind in ("token_file", "program"):
            continue
        problem = _value_problem(value.kind, Path(str(raw)), str(raw))
        if problem:
            say(f"{given(parser, dest, argv)}={str(raw)!r}: {problem}; {value.fix}")
    try:
        out.workflows = load_workflows(args.workflows) if args.workflows else load_workflows()
    except WorkflowError as exc:
        if not any(p.startswith("--workflows") for p in out.problems):
            say(f"--workflows={str(args.workflows)!r}: {exc}; {VALUES['workflows'].fix}")
        return out
    if any(p.startswith("--workflows") for p in out.problems):
        return out
    if not out.workflows:
        fix = VALUES["workflows"].fix
        say(f"--workflows={str(args.workflows)!r}: holds no workflow file; {fix}")
        return out
    names = backend_names(out.workflows)
    unknown = [b for b in out.backends if b.lower() not in names]
    if unknown:
        say(
            f"{given(parser, 'backends', argv)}: unknown backend {', '.join(unknown)}; "
            f"name those of {', '.join(sorted(names))}"
        )
        return out
    out.backends = list(dict.fromkeys(names[b.lower()] for b in out.backends))
    try:
        out.pythons = interpreter.configured(args.python, out.backends)
    except ValueError as exc:
        say(f"{exc}; {VALUES['python'].fix}")
    where = given(parser, "python", argv)
    for backend, path in out.pythons.items():
        why = _program_problem(path)
        if why:
            say(f"{where} for {backend}: {path}: cannot run it: {why}; {VALUES['python'].fix}")
    if os.geteuid() == 0 and not args.no_job_user:
        try:
            pwd.getpwnam(args.job_user)
        except KeyError:
            say(
                f"--job-user={args.job_user!r}: no such user; create it (useradd --system "
                f"{args.job_user}), or give --no-job-user for a trial on a machine of your own"
            )
    if args.service and not out.problems:
        out.token = _registration_token(args, out.problems, given(parser, "state_dir", argv))
    return out


def _value_problem(kind: str, path: Path, text: str) -> str | None:
    if kind == "url":
        return url_problem(text)
    if kind == "state":
        return directory_problem(path, create=True)
    if kind in ("directory", "workflows"):
        return directory_problem(path, create=False)
    return None


def _program_problem(path: Path) -> str | None:
    if not path.exists():
        return "no such file"
    if path.is_dir():
        return "a directory, not a program"
    if not os.access(path, os.X_OK):
        return "not executable"
    return None


def _registration_token(
    args: argparse.Namespace, problems: list[str], state_dir: str
) -> str | None:
    """The registration token (the environment's is then dropped from it, so no child process
    inherits it), when the runner has no credentials for this service; a problem otherwise.
    `state_dir`: what the operator typed for the state directory."""
    token = os.environ.pop(REGISTRATION_TOKEN_ENV, None)
    state = args.state_dir / "runner.json"
    try:
        needed = CredentialFile(state, args.service.rstrip("/")).load() is None
    except ValueError as exc:
        problems.append(
            f"{state_dir}: {state}: {exc}; delete it, and the runner registers again with its "
            "registration token"
        )
        return None
    path: Path | None = args.registration_token_file
    if path is not None:
        try:
            token = read_file(path).strip()
            if not token:
                raise ValueError("empty")
        except ValueError as exc:
            if needed:
                fix = VALUES["registration_token_file"].fix
                problems.append(f"--registration-token-file={str(path)!r}: {exc}; {fix}")
                return None
            logging.getLogger("ondemand.runner").warning(
                "--registration-token-file %s: %s; unused while %s holds this runner's token "
                "(needed should the service forget it)",
                path, exc, state,
            )  # fmt: skip
            return None
    if needed and not token:
        problems.append(
            f"no runner token in {state} and no registration token: set "
            f"{REGISTRATION_TOKEN_ENV} or --registration-token-file to one of the service's "
            "ONDEMAND_REGISTRATION_TOKENS"
        )
    return token


def daemon_main(argv: list[str]) -> int:
    parser = daemon_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=args.log_level,
        format="%(asctime)s %(levelname)s %(threadName)s %(message)s",
        stream=sys.stderr,
    )
    if args.undrain:
        drain = undrain(args.state_dir)
        print(f"undrained (was {drain.reason})" if drain else "not drained")
        return 0
    if not 0 <= args.drain_after <= MAX_DRAIN_AFTER:
        print(f"ondemand runner: --drain-after must be 0 to {MAX_DRAIN_AFTER}", file=sys.stderr)
        return 2
    options = read_options(parser, args, argv)
    for problem in options.problems:
        print(f"ondemand runner: {one_line(problem)}", file=sys.stderr)
    if options.problems:
        return 2
    backends, workflows, devices = options.backends, options.workflows, options.devices
    pythons, token = options.pythons, options.token
    labels = args.labels or sorted({label for b in backends for label in workflows[b].labels})
    config = DaemonConfig(
        service_url=args.service.rstrip("/"),
        name=args.name,
        backends=backends,
        labels=labels,
        devices=devices,
        cores=options.cores,
        state_dir=args.state_dir,
        work_dir=args.work_dir or args.state_dir / "work",
        registration_token=token,
        poll_s=args.poll_seconds,
        check_interval_s=args.check_interval,
        backoff_max_s=args.backoff_max,
        grace_s=args.grace_seconds,
        network_isolation=not args.no_network_isolation,
        compile_cache=not args.no_compile_cache,
        ephemeral=args.ephemeral,
        job_user=None if args.no_job_user else args.job_user,
        packages=PackageSources.from_args(args),
        log_max_bytes=args.log_max_bytes,
        keep_log_bytes=args.keep_log_bytes,
        pythons=pythons,
        drain_after=args.drain_after,
    )
    return serve(config, workflows)


def run_main(argv: list[str]) -> int:
    return local.run_main(argv)
