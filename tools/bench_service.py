"""The webhook burst: `ondemand serve` (a real process) against the GitHub sandbox, hit by a burst
of signed deliveries at a fixed concurrency, on SQLite and on PostgreSQL.

    python -m tools.bench_service [--deliveries 2000] [--commands 100] [--concurrency 64]
                                  [--db sqlite,postgres] [--json out.json]

What it checks and prints, per database: deliveries per second over the burst, webhook latency
(p50, p99, max), answers other than 202/200, and then, once the service has worked through the
backlog, that every `/test` command made exactly one job and got one 👀 and one result comment
(read back from the sandbox, as a maintainer would see them), and how long that took.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import random
import resource
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

import psycopg
from sqlalchemy import create_engine, text

from devtools.stack import Stack, free_port
from sandbox.client import SandboxAdmin

OWNER, NAME, BOT, USER = "acme", "kernels", "ondemand-bot", "alice"
REPO = f"{OWNER}/{NAME}"
PG_CONNINFO = "host=127.0.0.1 port=5432 dbname=test user=postgres connect_timeout=3"
PULLS = 10


@dataclass(frozen=True)
class Delivery:
    event: str
    body: bytes
    command: bool


@dataclass
class Figures:
    db: str
    deliveries: int
    concurrency: int
    seconds: float
    per_second: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    refused: int
    jobs: int
    commands: int
    one_job_each: bool
    reactions: int
    result_comments: int
    drained_s: float


def _git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def make_repo(root: Path) -> Path:
    """A repository with a main branch and one feature branch per pull request."""
    repo = root / "kernels"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.email", "bench@example.com")
    _git(repo, "config", "user.name", "bench")
    (repo / "README.md").write_text("kernels\n")
    _git(repo, "add", "README.md")
    _git(repo, "commit", "-q", "-m", "initial")
    for n in range(PULLS):
        _git(repo, "checkout", "-q", "-b", f"feature-{n}", "main")
        (repo / f"op_{n}.py").write_text(f"x = {n}\n")
        _git(repo, "add", f"op_{n}.py")
        _git(repo, "commit", "-q", "-m", f"op {n}")
    _git(repo, "checkout", "-q", "main")
    return repo


def sign(secret: str, body: bytes) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def build_deliveries(
    admin: SandboxAdmin, pulls: list[int], total: int, commands: int, prefix: str = "op"
) -> list[Delivery]:
    """`commands` real `/test {prefix}_NNN:cpu` comments (made in the sandbox while its webhook
    is held, so their payloads are GitHub's) and `total - commands` other deliveries: comments
    without a command and pings, which the service answers from the payload alone."""
    admin.hold_deliveries()
    before = len(admin.deliveries())
    for i in range(commands):
        admin.comment(REPO, pulls[i % len(pulls)], USER, f"/test {prefix}_{i:03d}:cpu")
    admin.comment(REPO, pulls[0], USER, "Looks good to me.")
    made = [d for d in admin.deliveries()[before:] if d["event"] == "issue_comment"]
    chatter_template = made[-1]["payload"]
    out: list[Delivery] = []
    for d in made[:commands]:
        out.append(Delivery("issue_comment", json.dumps(d["payload"]).encode(), True))
    for i in range(total - commands):
        if i % 4 == 3:
            payload = {"zen": "Keep it logically awesome.", "hook_id": i}
            out.append(Delivery("ping", json.dumps(payload).encode(), False))
            continue
        payload = json.loads(json.dumps(chatter_template))
        payload["comment"]["id"] = 10_000_000 + i
        payload["comment"]["body"] = f"Comment {i}: no command here, just talk."
        out.append(Delivery("issue_comment", json.dumps(payload).encode(), False))
    random.Random(7).shuffle(out)
    return out


async def _post(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str, head: bytes, body: bytes
) -> int:
    """One keep-alive HTTP/1.1 POST on an open connection; the answer's status."""
    writer.write(head + body)
    await writer.drain()
    status_line = await reader.readline()
    length = 0
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b""):
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    await reader.readexactly(length)
    return int(status_line.split()[1])


async def burst(
    url: str, secret: str, deliveries: list[Delivery], concurrency: int
) -> tuple[float, list[float], int]:
    """Post every delivery with `concurrency` connections in flight; (seconds, latencies,
    refused). A bare asyncio HTTP/1.1 client: on a 2-core machine a full-featured client
    spends more CPU than the service it measures."""
    parsed = urllib.parse.urlsplit(url)
    host, port = parsed.hostname or "127.0.0.1", parsed.port or 80
    requests = []
    for d in deliveries:
        head = (
            f"POST {parsed.path} HTTP/1.1\r\nHost: {host}:{port}\r\n"
            "Content-Type: application/json\r\n"
            f"X-GitHub-Event: {d.event}\r\nX-GitHub-Delivery: {uuid.uuid4()}\r\n"
            f"X-Hub-Signature-256: {sign(secret, d.body)}\r\n"
            f"Content-Length: {len(d.body)}\r\n\r\n"
        ).encode()
        requests.append((head, d.body))
    requests.reverse()
    latencies: list[float] = []
    refused = 0

    async def worker() -> None:
        nonlocal refused
        reader, writer = await asyncio.open_connection(host, port)
        try:
            while requests:
                head, body = requests.pop()
                start = time.perf_counter()
                try:
                    status = await asyncio.wait_for(_post(reader, writer, host, head, body), 30)
                except (TimeoutError, OSError, asyncio.IncompleteReadError, ValueError):
                    status = 0
                    writer.close()
                    reader, writer = await asyncio.open_connection(host, port)
                latencies.append(time.perf_counter() - start)
                refused += status not in (200, 202)
        finally:
            writer.close()

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - start, latencies, refused


def pg_schema() -> tuple[str, str]:
    schema = f"bench_{secrets.token_hex(4)}"
    with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    url = f"postgresql+psycopg://postgres@127.0.0.1:5432/test?options=-csearch_path%3D{schema}"
    return schema, url


def drop_schema(schema: str) -> None:
    with psycopg.connect(PG_CONNINFO, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def drained(db_url: str) -> bool:
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            busy = conn.execute(
                text(
                    "SELECT (SELECT count(*) FROM deliveries WHERE done_at IS NULL)"
                    " + (SELECT count(*) FROM outbox WHERE done_at IS NULL)"
                )
            ).scalar()
    finally:
        engine.dispose()
    return busy == 0


def job_counts(db_url: str) -> tuple[int, int]:
    """(jobs, distinct command comments among them)."""
    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            jobs = conn.execute(text("SELECT count(*) FROM jobs WHERE op LIKE 'op_%'")).scalar()
            distinct = conn.execute(
                text("SELECT count(DISTINCT command_comment_id) FROM jobs WHERE op LIKE 'op_%'")
            ).scalar()
    finally:
        engine.dispose()
    return int(jobs or 0), int(distinct or 0)


def run_one(kind: str, args: argparse.Namespace, workdir: Path) -> Figures:
    schema = None
    if kind == "postgres":
        schema, db_url = pg_schema()
    else:
        db_url = f"sqlite:///{workdir / 'ondemand.db'}"
    stack = Stack(workdir)
    try:
        repo = make_repo(workdir)
        secret = secrets.token_hex(16)
        gh_port, svc_port = free_port(), free_port()
        gh_url, svc_url = f"http://127.0.0.1:{gh_port}", f"http://127.0.0.1:{svc_port}"
        sandbox = stack.start(
            "sandbox", ["sandbox", "--port", str(gh_port), "--log-level", "warning"], {}
        )
        stack.wait_http(sandbox, f"{gh_url}/_sandbox/state")
        admin = SandboxAdmin(gh_url)
        admin.create_user(OWNER, "Organization")
        admin.create_user(USER)
        admin.create_user(BOT, "Bot")
        token = admin.create_token(BOT)
        admin.create_repo(OWNER, NAME, str(repo))
        admin.set_permission(REPO, USER, "write")
        pulls = [
            int(admin.open_pull(REPO, head=f"feature-{n}", base="main", user=USER)["number"])
            for n in range(PULLS)
        ]
        admin.set_webhook(f"{svc_url}/webhook", secret)  # held: the burst sends them instead
        warmup = build_deliveries(admin, pulls, args.warmup, args.warmup // 20, prefix="warm")
        deliveries = build_deliveries(admin, pulls, args.deliveries, args.commands)
        env = {
            "ONDEMAND_DATABASE_URL": db_url,
            "ONDEMAND_GITHUB_API_URL": gh_url,
            "ONDEMAND_GITHUB_TOKEN": token,
            "ONDEMAND_WEBHOOK_SECRETS": secret,
            "ONDEMAND_REGISTRATION_TOKENS": secrets.token_hex(8),
            "ONDEMAND_PUBLIC_URL": svc_url,
            "ONDEMAND_DEFAULT_BACKENDS": "cpu",
            "ONDEMAND_BOT_LOGIN": BOT,
            **dict(kv.split("=", 1) for kv in args.env),
        }
        service = stack.start(
            "service", ["serve", "--port", str(svc_port), "--log-level", "warning"], env
        )
        stack.wait_http(service, f"{svc_url}/healthz")
        if warmup:  # a service that has run a while: its queries compiled, its client connected
            asyncio.run(burst(f"{svc_url}/webhook", secret, warmup, args.concurrency))
            deadline = time.monotonic() + args.drain_timeout
            while not drained(db_url) and time.monotonic() < deadline:
                time.sleep(0.25)
        spy = None
        if args.py_spy:  # a flame graph of the service during the burst (lab use)
            out = args.py_spy.with_suffix(f".{kind}.txt")
            spy = subprocess.Popen(
                [
                    args.py_spy_bin,
                    "record",
                    "-f",
                    "raw",
                    "-o",
                    str(out),
                    "-r",
                    "200",
                    "--pid",
                    str(service.popen.pid),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(1.0)
        cpu_before = resource.getrusage(resource.RUSAGE_SELF)
        seconds, latencies, refused = asyncio.run(
            burst(f"{svc_url}/webhook", secret, deliveries, args.concurrency)
        )
        cpu_after = resource.getrusage(resource.RUSAGE_SELF)
        client_cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (
            cpu_after.ru_stime - cpu_before.ru_stime
        )
        print(
            f"{kind}: load generator used {client_cpu:.1f} s of CPU in {seconds:.1f} s",
            file=sys.stderr,
        )
        if spy is not None:
            spy.send_signal(2)
            spy.wait(timeout=30)
        sent_at = time.monotonic()
        deadline = sent_at + args.drain_timeout
        while not drained(db_url) and time.monotonic() < deadline:
            time.sleep(0.25)
        drained_s = time.monotonic() - sent_at
        jobs, distinct = job_counts(db_url)
        reactions = comments = 0
        every = admin.state()["comments"]
        for number in pulls:
            for c in every:
                if c["repo"] != REPO or c["issue_number"] != number or c["deleted"]:
                    continue
                if c["user"] == BOT and c["body"].startswith("<!-- ondemand:op_"):
                    comments += 1
                if c["user"] == USER and c["body"].startswith("/test op_"):
                    reactions += sum(1 for r in c.get("reactions", []) if r["content"] == "eyes")
        latencies.sort()
        return Figures(
            db=kind,
            deliveries=len(deliveries),
            concurrency=args.concurrency,
            seconds=round(seconds, 2),
            per_second=round(len(deliveries) / seconds, 1),
            p50_ms=round(statistics.median(latencies) * 1000, 1),
            p99_ms=round(latencies[int(0.99 * (len(latencies) - 1))] * 1000, 1),
            max_ms=round(latencies[-1] * 1000, 1),
            refused=refused,
            jobs=jobs,
            commands=args.commands,
            one_job_each=jobs == args.commands and distinct == args.commands,
            reactions=reactions,
            result_comments=comments,
            drained_s=round(drained_s, 1),
        )
    finally:
        stack.close()
        if schema is not None:
            drop_schema(schema)


def table(rows: list[Figures]) -> str:
    head = (
        "| db | deliveries/s | p50 ms | p99 ms | max ms | refused | jobs / commands | 👀 "
        "| result comments | backlog done in |"
    )
    lines = [head, "|" + "---|" * 10]
    for f in rows:
        lines.append(
            f"| {f.db} | {f.per_second} | {f.p50_ms} | {f.p99_ms} | {f.max_ms} | {f.refused} "
            f"| {f.jobs} / {f.commands}{'' if f.one_job_each else ' ✗'} | {f.reactions} "
            f"| {f.result_comments} | {f.drained_s} s |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_service", description=__doc__)
    parser.add_argument("--deliveries", type=int, default=2000)
    parser.add_argument("--commands", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument(
        "--warmup", type=int, default=200, help="deliveries sent (and worked off) before the burst"
    )
    parser.add_argument("--db", default="sqlite,postgres", help="comma-separated: sqlite,postgres")
    parser.add_argument("--drain-timeout", type=float, default=180.0)
    parser.add_argument("--py-spy", type=Path, default=None, help="profile the service to here")
    parser.add_argument("--py-spy-bin", default="py-spy")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the service")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    rows: list[Figures] = []
    for kind in [k.strip() for k in args.db.split(",") if k.strip()]:
        with tempfile.TemporaryDirectory(prefix=f"bench-{kind}-") as tmp:
            rows.append(run_one(kind, args, Path(tmp)))
            print(f"{kind}: done", file=sys.stderr)
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(r) for r in rows], indent=2))
    print(table(rows))
    bar = all(
        r.per_second >= 500
        and r.p99_ms < 100
        and r.refused == 0
        and r.one_job_each
        and r.reactions == r.commands
        and r.result_comments == r.commands
        for r in rows
    )
    print(
        f"bar (≥500/s, p99 < 100 ms, every command one job, one 👀, one comment): "
        f"{'met' if bar else 'NOT met'}"
    )
    return 0 if bar else 1


if __name__ == "__main__":
    raise SystemExit(main())
