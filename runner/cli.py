"""`ondemand runner` (the daemon) and `ondemand run` (one workflow here), as argv → exit status."""

from __future__ import annotations

import argparse
import logging
import os
import socket
import sys
from pathlib import Path

from runner import local
from runner.daemon.fitness import DEFAULT_DRAIN_AFTER, undrain
from runner.daemon.loop import DaemonConfig, serve
from runner.environment import interpreter
from runner.environment.pyenv import PackageSources
from runner.job.logstream import DEFAULT_LIMIT, MIN_LIMIT
from workflows.spec import WorkflowError, backend_names, load_workflows

REGISTRATION_TOKEN_ENV = "ONDEMAND_REGISTRATION_TOKEN"
DEFAULT_JOB_USER = "ondemand-job"


def daemon_parser() -> argparse.ArgumentParser:
    env = os.environ.get
    parser = argparse.ArgumentParser(
        prog="ondemand runner",
        description="Claim jobs from the service and run them on this machine's devices.",
        epilog=f"The registration token comes from ${REGISTRATION_TOKEN_ENV} or "
        "--registration-token-file (never the command line: it would show in ps).",
    )
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
    parser.add_argument("--slots", type=int, default=None, help="jobs at once (default 1)")
    parser.add_argument(
        "--devices",
        help="comma-separated device ids, one slot each, exported to the job as the backend's "
        "visible-devices variable (e.g. 0,1,2,3)",
    )
    state = env("ONDEMAND_RUNNER_STATE", ".ondemand-runner")
    parser.add_argument("--state-dir", type=Path, default=Path(state), help="token, caches")
    parser.add_argument("--work-dir", type=Path, default=None, help="default: STATE_DIR/work")
    parser.add_argument("--registration-token-file", type=Path)
    parser.add_argument("--workflows", type=Path, help="directory of workflow YAML files")
    parser.add_argument("--poll-seconds", type=float, default=25.0, help="claim long-poll wait")
    parser.add_argument("--check-interval", type=float, default=60.0, help="device check reuse")
    parser.add_argument("--backoff-max", type=float, default=30.0)
    parser.add_argument("--grace-seconds", type=float, default=10.0, help="SIGTERM → SIGKILL")
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
    parser.add_argument(
        "--log-max-bytes",
        type=int,
        default=DEFAULT_LIMIT,
        help="one job's log at most (its head and tail kept, the middle cut; keep it at most "
        "the service's ONDEMAND_LOG_MAX_BYTES)",
    )
    parser.add_argument(
        "--keep-log-bytes",
        type=int,
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
    parser.add_argument("--log-level", default="INFO")
    return parser


def daemon_main(argv: list[str]) -> int:
    args = daemon_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(threadName)s %(message)s",
        stream=sys.stderr,
    )
    if args.undrain:
        drain = undrain(args.state_dir)
        print(f"undrained (was {drain.reason})" if drain else "not drained")
        return 0
    if args.drain_after < 0:
        print("ondemand runner: --drain-after must be 0 or more", file=sys.stderr)
        return 2
    backends = args.backends or [
        b for b in os.environ.get("ONDEMAND_RUNNER_BACKENDS", "").split(",") if b
    ]
    if not args.service or not backends:
        print("ondemand runner: --service and at least one --backend are needed", file=sys.stderr)
        return 2
    if args.log_max_bytes < MIN_LIMIT:
        print(f"ondemand runner: --log-max-bytes must be at least {MIN_LIMIT}", file=sys.stderr)
        return 2
    if args.devices and args.slots:
        print("ondemand runner: give --slots or --devices, not both", file=sys.stderr)
        return 2
    devices: list[str | None] = (
        [d.strip() for d in args.devices.split(",") if d.strip()]
        if args.devices
        else [None] * (args.slots or 1)
    )
    if args.ephemeral and len(devices) != 1:
        print("ondemand runner: --ephemeral runs one job: give one slot", file=sys.stderr)
        return 2
    # Read once, then gone from the environment every child process inherits.
    token = os.environ.pop(REGISTRATION_TOKEN_ENV, None)
    if args.registration_token_file:
        token = args.registration_token_file.read_text().strip()
    try:
        workflows = load_workflows(args.workflows) if args.workflows else load_workflows()
    except WorkflowError as exc:
        print(f"ondemand runner: {exc}", file=sys.stderr)
        return 2
    names = backend_names(workflows)
    unknown = [b for b in backends if b.lower() not in names]
    if unknown:
        print(
            f"ondemand runner: unknown backend(s) {', '.join(unknown)}; "
            f"known: {', '.join(sorted(names))}",
            file=sys.stderr,
        )
        return 2
    backends = list(dict.fromkeys(names[b.lower()] for b in backends))
    try:
        pythons = interpreter.configured(args.python, backends)
    except ValueError as exc:
        print(f"ondemand runner: {exc}", file=sys.stderr)
        return 2
    labels = args.labels or sorted({label for b in backends for label in workflows[b].labels})
    config = DaemonConfig(
        service_url=args.service.rstrip("/"),
        name=args.name,
        backends=backends,
        labels=labels,
        devices=devices,
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
