"""Every process of the soak, started in order and gone when it closes (also on Ctrl-C or a
failure): the GitHub sandbox, PostgreSQL (a server of the soak's own, or a database on the
shared one), `ondemand serve` replicas behind HAProxy (health-checked on `/healthz`; the
sandbox delivers to the balancer and the runners talk to it) and `ondemand runner` daemons.
Each process runs in its own session with its log appended to across restarts, so a fault can
kill, stop or restart any of them and the logs keep every life."""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from devtools.stack import wait_answering
from sandbox.client import SandboxAdmin
from tests.support.keys import rsa_keypair
from tools.soak.repo import SoakRepo, make_repo, write_workflows

OWNER = "acme"
REPOS = ("soak-a", "soak-b")
MAINTAINERS = ("maint-1", "maint-2")
OUTSIDERS = ("outsider", "stranger")  # read permission; none at all
BOT = "ondemand-bot"  # the token user (`--github token`)
APP_ID = 4711
APP_SLUG = "ondemand"
PG_BIN = Path("/usr/lib/postgresql/15/bin")
SHARED_PG = "host=127.0.0.1 port=5432 user=postgres connect_timeout=3"
DB_NAME = "ondemand_soak"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Child:
    """One process that may be started several times (its log appended to), killed, stopped
    and continued; `lives` counts its starts."""

    name: str
    argv: list[str]
    log: Path
    env: dict[str, str] = field(default_factory=dict)
    user: str | None = None
    popen: subprocess.Popen[bytes] | None = None
    lives: int = 0
    stopped: bool = False  # SIGSTOPped

    def start(self) -> Child:
        with self.log.open("ab") as out:
            out.write(f"\n=== {self.name}: life {self.lives + 1} at {time.time():.3f}\n".encode())
            out.flush()
            self.popen = subprocess.Popen(
                self.argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, **self.env},
                start_new_session=True,
                user=self.user,
                group=self.user,
                extra_groups=[] if self.user else None,
            )
        self.lives += 1
        self.stopped = False
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def send(self, sig: signal.Signals) -> None:
        """`sig` to the process itself (not its group: a runner's steps have groups of their
        own, and a crash takes only the daemon)."""
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)
        if sig == signal.SIGSTOP:
            self.stopped = True
        elif sig == signal.SIGCONT:
            self.stopped = False

    def wait(self, timeout: float) -> bool:
        """True when it exited within `timeout`."""
        if self.popen is None:
            return True
        try:
            self.popen.wait(timeout=timeout)
            return True
        except subprocess.TimeoutExpired:
            return False

    def kill(self) -> None:
        """SIGKILL, as a crash: the process alone."""
        self.send(signal.SIGKILL)
        self.wait(10)

    def stop(self, grace: float = 10.0, sig: signal.Signals = signal.SIGTERM) -> None:
        """Continue it if stopped, `sig` to its group, SIGKILL the group after `grace`."""
        if self.popen is None:
            return
        group = self.pid
        if self.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGCONT)
                os.killpg(group, sig)
            if not self.wait(grace):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(group, signal.SIGKILL)
                self.wait(10)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)  # what it left in its group
        self.stopped = False

    def rss_mib(self) -> float | None:
        """Its resident set size now, from /proc."""
        if not self.alive():
            return None
        try:
            for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    return round(int(line.split()[1]) / 1024, 1)
        except OSError:
            return None
        return None

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


@dataclass(frozen=True)
class WorldOptions:
    replicas: int = 3
    runners: int = 8
    postgres: str = "private"  # "private": a server of the soak's own; "shared": 127.0.0.1:5432
    github: str = "app"  # "app": check runs as a GitHub App; "token": commit statuses
    lease_s: int = 20
    branches: int = 10  # pull-request branches per repository
    versions: int = 30  # commits per branch to push through
    trace_memory: Path | None = None  # the first replica's allocation snapshots go here
    trace_every_s: float = 300.0
    # A runner's jobs lost to its own faults in a row before it is drained: fewer than the
    # default 3, so that a short run's broken runner (a few jobs a minute each) is drained.
    drain_after: int = 2


class Postgres:
    """PostgreSQL for the soak: its own server in the soak's directory (a restart touches
    nobody else's tests), or a fresh database on the machine's shared server."""

    def __init__(self, mode: str, directory: Path) -> None:
        self.mode = mode
        self.directory = directory
        self.port = 5432 if mode == "shared" else free_port()
        self.child: Child | None = None

    def conninfo(self, dbname: str = DB_NAME) -> str:
        return f"host=127.0.0.1 port={self.port} dbname={dbname} user=postgres connect_timeout=3"

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{DB_NAME}"

    def start(self) -> None:
        if self.mode == "shared":
            with psycopg.connect(SHARED_PG + " dbname=postgres", autocommit=True) as conn:
                conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
                conn.execute(f"CREATE DATABASE {DB_NAME}")
            return
        data = self.directory / "data"
        self.directory.mkdir(parents=True, exist_ok=True)
        shutil.chown(self.directory, "postgres", "postgres")
        subprocess.run(
            ["setpriv", "--reuid=postgres", "--regid=postgres", "--init-groups",
             str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres",
             "--no-sync"],
            check=True, capture_output=True,
        )  # fmt: skip
        self.child = Child(
            "postgres",
            [str(PG_BIN / "postgres"), "-D", str(data), "-p", str(self.port),
             "-k", str(self.directory), "-c", "listen_addresses=127.0.0.1",
             "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
             "-c", "max_connections=300"],
            self.directory.parent / "postgres.log",
            user="postgres",
        )  # fmt: skip
        self._up()
        with psycopg.connect(self.conninfo("postgres"), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DB_NAME}")

    def _up(self) -> None:
        assert self.child is not None
        self.child.start()
        deadline = time.monotonic() + 30
        while True:
            try:
                with psycopg.connect(self.conninfo("postgres")):
                    return
            except psycopg.Error:
                if not self.child.alive() or time.monotonic() > deadline:
                    raise RuntimeError(f"PostgreSQL did not start:\n{self.child.tail()}") from None
                time.sleep(0.1)

    def stop(self) -> None:
        """A fast shutdown: every connection is cut."""
        if self.mode == "shared":
            subprocess.run(
                ["pg_ctlcluster", "--skip-systemctl-redirect", "15", "main", "stop", "-m", "fast"],
                check=True, capture_output=True,
            )  # fmt: skip
        elif self.child is not None:
            self.child.stop(grace=20, sig=signal.SIGINT)

    def resume(self) -> None:
        if self.mode == "shared":
            subprocess.run(
                ["pg_ctlcluster", "--skip-systemctl-redirect", "15", "main", "start"],
                check=True, capture_output=True,
            )  # fmt: skip
        else:
            self._up()

    def close(self) -> None:
        if self.mode == "shared":
            with (
                contextlib.suppress(psycopg.Error),
                psycopg.connect(SHARED_PG + " dbname=postgres", autocommit=True) as conn,
            ):
                conn.execute(f"DROP DATABASE IF EXISTS {DB_NAME} WITH (FORCE)")
            return
        if self.child is not None:
            self.child.stop(grace=20, sig=signal.SIGINT)
        shutil.rmtree(self.directory / "data", ignore_errors=True)


HAPROXY_CFG = """\
global
    maxconn 1024
defaults
    mode http
    timeout connect 2s
    timeout client 90s
    timeout server 90s
    timeout queue 5s
    retries 2
    option redispatch
frontend soak
    bind 127.0.0.1:{port}
    default_backend replicas
backend replicas
    balance roundrobin
    option httpchk GET /healthz
    http-check expect status 200
    default-server inter 1s fall 2 rise 1
{servers}
"""


class World:
    """The soak's processes and the GitHub it talks to; `up` starts them, `close` ends them."""

    def __init__(self, options: WorldOptions, directory: Path) -> None:
        self.options = options
        self.directory = directory
        self.secret = secrets.token_hex(16)
        self.registration = secrets.token_hex(16)
        self.sandbox_port = free_port()
        self.balancer_port = free_port()
        self.sandbox_url = f"http://127.0.0.1:{self.sandbox_port}"
        self.balancer_url = f"http://127.0.0.1:{self.balancer_port}"
        self.postgres = Postgres(options.postgres, directory / "pg")
        self.sandbox: Child | None = None
        self.balancer: Child | None = None
        self.replicas: list[Child] = []
        self.runners: list[Child] = []
        self.repos: list[SoakRepo] = []
        self.admin: SandboxAdmin | None = None
        self.bot_login = f"{APP_SLUG}[bot]" if options.github == "app" else BOT
        self.replica_ports: list[int] = []

    # -- start ------------------------------------------------------------------------------

    def up(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self.directory.chmod(0o755)  # PostgreSQL's own user passes through to its directory
        for name in REPOS:
            path = self.directory / "git" / name
            repo = make_repo(path, f"{OWNER}/{name}", self.options.branches, self.options.versions)
            self.repos.append(repo)
        workflows = write_workflows(self.directory / "workflows")
        self.postgres.start()
        self._start_sandbox()
        auth = self._github_world()
        self._start_replicas(workflows, auth)
        self._start_balancer()
        self._start_runners(workflows)

    def _python(self, *argv: str) -> list[str]:
        return [sys.executable, "-m", "ondemand", *argv]

    def _start_sandbox(self) -> None:
        self.sandbox = Child(
            "sandbox",
            self._python(
                "sandbox", "--port", str(self.sandbox_port), "--log-level", "warning",
                "--webhook-url", f"{self.balancer_url}/webhook", "--webhook-secret", self.secret,
            ),
            self.directory / "sandbox.log",
        ).start()  # fmt: skip
        wait_http(self.sandbox, f"{self.sandbox_url}/_sandbox/state")
        self.admin = SandboxAdmin(self.sandbox_url, timeout=60)

    def _github_world(self) -> dict[str, str]:
        """Users, the repositories, the bot (an App or a token user); the service's auth."""
        admin = self.admin
        assert admin is not None
        admin.create_user(OWNER, "Organization")
        for login in (*MAINTAINERS, *OUTSIDERS):
            admin.create_user(login)
        auth: dict[str, str]
        if self.options.github == "app":
            private, public = rsa_keypair()
            key = self.directory / "app-key.pem"
            key.write_text(private)
            key.chmod(0o600)
            admin.register_app(APP_ID, public, slug=APP_SLUG)
            auth = {
                "ONDEMAND_GITHUB_APP_ID": str(APP_ID),
                "ONDEMAND_GITHUB_PRIVATE_KEY_PATH": str(key),
            }
        else:
            admin.create_user(BOT, "Bot")
            auth = {"ONDEMAND_GITHUB_TOKEN": admin.create_token(BOT), "ONDEMAND_BOT_LOGIN": BOT}
        for repo in self.repos:
            owner, name = repo.name.split("/")
            admin.create_repo(owner, name, str(repo.path))
            for login in MAINTAINERS:
                admin.set_permission(repo.name, login, "write")
            admin.set_permission(repo.name, OUTSIDERS[0], "read")
        return auth

    def _start_replicas(self, workflows: Path, auth: dict[str, str]) -> None:
        for i in range(self.options.replicas):
            port = free_port()
            self.replica_ports.append(port)
            env = {
                "ONDEMAND_DATABASE_URL": self.postgres.url,
                "ONDEMAND_GITHUB_API_URL": self.sandbox_url,
                "ONDEMAND_WEBHOOK_SECRETS": self.secret,
                "ONDEMAND_REGISTRATION_TOKENS": self.registration,
                "ONDEMAND_PUBLIC_URL": self.balancer_url,
                "ONDEMAND_DEFAULT_BACKENDS": "cpu",
                "ONDEMAND_LEASE_SECONDS": str(self.options.lease_s),
                "ONDEMAND_WORKFLOWS_DIR": str(workflows),
                "ONDEMAND_CHANGES_DIR": str(self.directory / f"changes-{i + 1}"),
                # GitHub's waits, compressed so that a soak of minutes drains in one.
                "ONDEMAND_RETRY_MAX_BACKOFF_S": "5",
                "ONDEMAND_GITHUB_SECONDARY_WAIT_S": "10",
                **auth,
            }
            if i == 0:  # the witness, if any: its memory looked at from inside, each minute
                env.update(self._memtrace_env())
            child = Child(
                f"replica-{i + 1}",
                self._python("serve", "--port", str(port), "--log-level", "info"),
                self.directory / f"replica-{i + 1}.log",
                env=env,
            )
            self.replicas.append(child.start())
            # One at a time: each migrates (or finds migrated) the schema before the next.
            wait_http(child, f"http://127.0.0.1:{port}/healthz")

    @property
    def probe_file(self) -> Path:
        """Where the first replica's probe appends a look at its memory each minute."""
        return self.directory / "replica-1-probe.jsonl"

    def _memtrace_env(self) -> dict[str, str]:
        """What makes a replica's Python probe its memory each minute and, with
        `trace_memory`, trace its allocations (tools/soak/memtrace)."""
        trace = Path(__file__).parent / "memtrace"
        path = os.pathsep.join(filter(None, [str(trace), os.environ.get("PYTHONPATH")]))
        env = {"PYTHONPATH": path, "SOAK_PROBE_FILE": str(self.probe_file)}
        if self.options.trace_memory is not None:
            env["SOAK_TRACE_MEMORY_DIR"] = str(self.options.trace_memory)
            env["SOAK_TRACE_EVERY_S"] = f"{self.options.trace_every_s:g}"
        return env

    def replica_url(self, index: int) -> str:
        return f"http://127.0.0.1:{self.replica_ports[index]}"

    def _start_balancer(self) -> None:
        servers = "\n".join(
            f"    server r{i + 1} 127.0.0.1:{port} check"
            for i, port in enumerate(self.replica_ports)
        )
        config = self.directory / "haproxy.cfg"
        config.write_text(HAPROXY_CFG.format(port=self.balancer_port, servers=servers))
        self.balancer = Child(
            "haproxy", ["haproxy", "-db", "-f", str(config)], self.directory / "haproxy.log"
        ).start()
        wait_http(self.balancer, f"{self.balancer_url}/healthz")

    def _start_runners(self, workflows: Path) -> None:
        for i in range(self.options.runners):
            name = f"runner-{i + 1}"
            state = self.directory / "runners" / name
            state.mkdir(parents=True, exist_ok=True)
            self.python_link(name).symlink_to(Path(sys.prefix), target_is_directory=True)
            argv = self._python(
                "runner", "--service", self.balancer_url, "--backend", "cpu",
                "--name", name, "--state-dir", str(state), "--workflows", str(workflows),
                "--poll-seconds", "10", "--check-interval", "300", "--grace-seconds", "2",
                "--backoff-max", "5", "--no-job-user", "--no-compile-cache",
                "--python", f"cpu={self.python_link(name)}/bin/python",
                "--drain-after", str(self.options.drain_after),
            )  # fmt: skip
            child = Child(
                name,
                argv,
                self.directory / f"{name}.log",
                env={"ONDEMAND_REGISTRATION_TOKEN": self.registration, "TZ": "UTC"},
            )
            self.runners.append(child.start())
        deadline = time.monotonic() + 120
        for child in self.runners:
            credentials = self.directory / "runners" / child.name / "runner.json"
            while not credentials.exists():
                if not child.alive() or time.monotonic() > deadline:
                    raise RuntimeError(f"{child.name} did not register:\n{child.tail()}")
                time.sleep(0.2)

    # -- faults' handles ---------------------------------------------------------------------

    def python_link(self, runner: str) -> Path:
        """The runner's job Python is this venv's, through this link: removing it makes the
        job Python vanish."""
        return self.directory / "runners" / runner / "pyhost"

    def break_python(self, runner: str) -> None:
        self.python_link(runner).unlink(missing_ok=True)

    def mend_python(self, runner: str) -> str:
        """The job Python back, then the operator's undrain; what `--undrain` said."""
        link = self.python_link(runner)
        if not link.is_symlink():
            link.symlink_to(Path(sys.prefix), target_is_directory=True)
        state = self.directory / "runners" / runner
        said = subprocess.run(
            self._python("runner", "--undrain", "--state-dir", str(state)),
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        return said.stdout.strip().split(" (was ")[0] or said.stderr.strip()[-200:]

    def restart_balancer(self, down_s: float) -> None:
        assert self.balancer is not None
        self.balancer.stop(grace=5)
        time.sleep(down_s)
        self.balancer.start()
        wait_http(self.balancer, f"{self.balancer_url}/healthz")

    # -- end --------------------------------------------------------------------------------

    def close(self) -> None:
        """Everything the soak started is gone after this, whatever state it is in."""
        for runner in self.runners:  # twice: a runner's second SIGTERM stops its steps
            if runner.alive():
                runner.send(signal.SIGCONT)
                runner.send(signal.SIGTERM)
        time.sleep(0.3)
        for runner in self.runners:
            runner.send(signal.SIGTERM)
        deadline = time.monotonic() + 12  # an idle runner leaves when its long-poll ends
        for runner in self.runners:
            runner.wait(max(0.1, deadline - time.monotonic()))
            runner.stop(grace=1)
        self._kill_leftovers()
        for child in [*self.replicas, self.balancer, self.sandbox]:
            if child is not None:
                child.stop(grace=10)
        if self.admin is not None:
            self.admin.close()
        self.postgres.close()
        self._kill_leftovers()

    def _kill_leftovers(self) -> None:
        """Steps of runners that were killed: any process working under the soak's directory
        (its cwd there), and nothing else."""
        root = self.directory.resolve()
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            try:
                cwd = Path(os.readlink(proc / "cwd"))
            except OSError:
                continue
            if cwd.is_relative_to(root) and cwd != root / "pg" and not _is_postgres(proc):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(proc.name), signal.SIGKILL)


def _is_postgres(proc: Path) -> bool:
    try:
        return (proc / "comm").read_text().strip().startswith("postgres")
    except OSError:
        return False


def wait_http(child: Child, url: str, timeout: float = 60.0) -> None:
    """Until `url` answers 2xx; fails with the child's log if it died or never did."""
    wait_answering(child.name, url, child.alive, child.tail, timeout)
