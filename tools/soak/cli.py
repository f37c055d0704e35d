"""`python -m tools.soak`: start the world, load it and fault it for `--minutes`, heal every
fault, drain (until nothing is queued, running or waiting to be said, and every delivery was
answered 2xx), read back what GitHub shows, check the invariants, print the table and the
figures (commands sent, faults by kind, webhook p99 outside PostgreSQL restarts, each
replica's RSS at start and end, how long start-up and the drain took) and write them as JSON.

Exit status: 0 when every invariant holds, 1 when one does not, 2 when the soak itself broke.
Ctrl-C (or SIGTERM) stops it; everything it started goes with it."""

from __future__ import annotations

import argparse
import json
import logging
import random
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tools.soak import bars, collect, faults, load
from tools.soak.events import Record
from tools.soak.invariants import check_all, render_table, webhook_p99_ms
from tools.soak.repo import VERDICTS
from tools.soak.world import OUTSIDERS, World, WorldOptions

log = logging.getLogger("soak")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tools.soak", description=__doc__)
    parser.add_argument("--minutes", type=float, default=3.0, help="load and faults this long")
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--runners", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", type=Path, help="write the figures, verdicts and record here")
    parser.add_argument(
        "--fault-interval",
        default="45:90",
        help="seconds between faults, MIN:MAX (compress for short runs, e.g. 15:30)",
    )
    parser.add_argument("--no-faults", action="store_true", help="load only")
    parser.add_argument(
        "--no-witness",
        dest="witness",
        action="store_false",
        help="let faults kill every replica (by default the first is never killed, so its "
        "memory can be read over the whole run)",
    )
    parser.add_argument(
        "--postgres",
        choices=("private", "shared"),
        default="private",
        help="private: a PostgreSQL server of the soak's own (its restarts disturb no one); "
        "shared: database ondemand_soak on 127.0.0.1:5432, restarted with pg_ctlcluster",
    )
    parser.add_argument("--github", choices=("app", "token"), default="app",
                        help="app: check runs as a GitHub App; token: commit statuses")  # fmt: skip
    parser.add_argument("--lease", type=int, default=20, help="ONDEMAND_LEASE_SECONDS")
    parser.add_argument("--drain-timeout", type=float, default=300.0)
    parser.add_argument("--workdir", type=Path, help="logs and repositories (default: a temp dir)")
    parser.add_argument(
        "--trace-memory",
        type=Path,
        help="trace the first replica's allocations (the witness) and dump a snapshot here "
        "every --trace-every seconds; read them with python -m tools.soak.memdiff DIR",
    )
    parser.add_argument("--trace-every", type=float, default=300.0)
    parser.add_argument(
        "--github-budget",
        type=int,
        help="enforce GitHub's primary rate limit in the sandbox: this many calls an hour per "
        "login, refused past it with GitHub's 403 (an App installation gets 5000); by default "
        "the sandbox only reports it",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # every admin call otherwise
    low, high = (float(x) for x in args.fault_interval.split(":"))
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix=f"ondemand-soak-{args.seed}-"))
    options = WorldOptions(
        replicas=args.replicas,
        runners=args.runners,
        postgres=args.postgres,
        github=args.github,
        lease_s=args.lease,
        trace_memory=args.trace_memory,
        trace_every_s=args.trace_every,
    )
    world = World(options, workdir)
    signal.signal(signal.SIGTERM, _interrupt)
    signal.signal(signal.SIGINT, _interrupt)
    log.info("workdir %s", workdir)
    try:
        outcome = soak(world, args, (low, high))
    except KeyboardInterrupt:
        log.warning("interrupted: stopping everything")
        return 130
    except Exception:
        log.exception("the soak broke (logs in %s)", workdir)
        return 2
    finally:
        world.close()
        log.info("everything stopped; logs in %s", workdir)
    print(outcome["text"])
    if args.json is not None:
        args.json.write_text(json.dumps(outcome["json"], indent=1))
    return 0 if outcome["ok"] else 1


def soak(world: World, args: argparse.Namespace, interval: tuple[float, float]) -> dict[str, Any]:
    started = time.time()
    world.up()
    up_s = time.time() - started
    log.info("world up in %.1fs: %s", up_s, world.balancer_url)
    assert world.admin is not None
    if args.github_budget is not None:
        world.admin.set_rate_limit(args.github_budget)
    time.sleep(3)  # the replicas' first background rounds, before RSS is read
    rss_start = {r.name: r.rss_mib() for r in world.replicas}

    stop_load, stop_redeliver = threading.Event(), threading.Event()
    redeliverer = load.Redeliverer(world.admin)
    generator = load.Load(
        world.admin,
        world.repos,
        random.Random(args.seed),
        world.balancer_url,
        world.secret,
        redeliverer.deliveries,
    )
    generator.open_pulls()
    witness = world.replicas[0].name if args.witness and len(world.replicas) > 1 else None
    injector = faults.Faults(world, random.Random(args.seed * 7919 + 1), interval, witness)
    sampler = collect.Sampler(world.replicas, world.postgres.conninfo(), world.probe_file)
    until = time.time() + args.minutes * 60
    threads = [
        threading.Thread(target=generator.run, args=(until, stop_load), name="load", daemon=True),
        threading.Thread(target=redeliverer.run, args=(stop_redeliver,), name="redeliver",
                         daemon=True),
    ]  # fmt: skip
    if not args.no_faults:
        threads.append(
            threading.Thread(target=injector.run, args=(until, stop_load), name="faults",
                             daemon=True)
        )  # fmt: skip
    for thread in threads:
        thread.start()
    next_sample = time.time()
    while time.time() < until:
        if time.time() >= next_sample:
            sampler.sample(minute=round((time.time() - started - up_s) / 60, 2))
            next_sample += 60
        time.sleep(1)
    stop_load.set()
    for thread in threads[:1] + threads[2:]:
        thread.join(timeout=120)
    load_end = time.time()
    injector.heal()
    healed_s = time.time() - load_end
    log.info("load and faults over; healed in %.1fs; draining", healed_s)
    drained, waited = drain(world, redeliverer, args.drain_timeout)
    drain_s = time.time() - load_end
    stop_redeliver.set()
    rss_end = {r.name: r.rss_mib() for r in world.replicas}
    sampler.sample(minute=round((time.time() - started - up_s) / 60, 2))

    record = Record(
        seed=args.seed,
        mode=args.github,
        bot=world.bot_login,
        outsiders=OUTSIDERS,
        expected=dict(VERDICTS),
    )
    record.sent = list(generator.sent)
    record.redeliveries = list(redeliverer.pressed)
    record.faults = sorted(injector.records, key=lambda f: f.start)
    record.drain_after = world.options.drain_after
    state = world.admin.state()
    record.deliveries, record.comments, record.statuses, record.check_runs = collect.github_view(
        state
    )
    record.jobs = collect.jobs(world.postgres.conninfo())
    record.reactions_left_out = collect.reactions_left_out(world.postgres.conninfo())
    record.runs = collect.runner_events([(r.name, r.log) for r in world.runners])
    record.server_answers, record.server_errors = collect.server_errors(
        [(r.name, r.log) for r in world.replicas]
    )
    record.deadlocks = collect.deadlocks(world.directory / "postgres.log")
    checks = check_all(record)
    p99, counted = webhook_p99_ms(record)
    commands = [s for s in record.sent if s.command]
    minutes = args.minutes
    figures = {
        "seed": args.seed,
        "minutes": minutes,
        "replicas": args.replicas,
        "runners": args.runners,
        "start_s": round(up_s, 1),
        "heal_s": round(healed_s, 1),
        "drain_s": round(drain_s, 1),
        "drained": drained,
        "left_at_drain_end": waited,
        "commands": len(commands),
        "commands_per_minute": round(len(commands) / minutes, 1),
        "sent": load.summary(record.sent),
        "jobs": len(record.jobs),
        "jobs_by_status": dict(sorted(Counter(j.status for j in record.jobs).items())),
        "deliveries": len(record.deliveries),
        "redeliveries_after_failure": len(record.redeliveries),
        "faults": faults.summary(record.faults),
        "fault_errors": injector.errors,
        "load_errors": generator.errors[:20],
        "github_calls": collect.github_calls(state, len(commands), minutes),
        "webhook_p99_ms": p99,
        "webhook_attempts_counted": counted,
        "rss_mib": {name: {"start": rss_start[name], "end": rss_end[name]} for name in rss_start},
        "witness": witness,
        "memory": sampler.memory(),
        "database_mib": sampler.database(),
        "witness_curve": witness_curve(sampler.samples),
        "samples": sampler.samples,
        "replica_lives": {r.name: r.lives for r in world.replicas},
        "logged_errors": collect.log_findings(world.directory),
        "workdir": str(world.directory),
    }
    ok = all(c.ok for c in checks) and drained
    text = "\n".join(
        [
            render_table(checks),
            "",
            bars.render(bars.bars(figures)),
            "",
            _figures_text(figures),
            "",
            "faults:",
            *(f"  {f.start - started:7.1f}s +{f.end - f.start:5.1f}s {f.kind} {f.target}: "
              f"{f.detail}" for f in record.faults),
        ]
    )  # fmt: skip
    data = {
        "figures": figures,
        "checks": [{"name": c.name, "checked": c.checked, "violations": list(c.violations)}
                   for c in checks],
        "record": record.to_json(),
    }  # fmt: skip
    return {"ok": ok, "text": text, "json": data}


def drain(world: World, redeliverer: load.Redeliverer, timeout: float) -> tuple[bool, dict]:
    """Wait until nothing is queued, running or waiting in the service, and every delivery was
    answered 2xx (redelivering what was not), three looks in a row; (drained, what was left)."""
    deadline = time.time() + timeout
    quiet = 0
    left: dict[str, int] = {}
    while time.time() < deadline:
        try:
            left = collect.pending(world.postgres.conninfo())
            left["unanswered_deliveries"] = redeliverer.round()
        except Exception as exc:  # the database may still be coming back
            log.info("drain: %s", exc)
            left = {"error": 1}
        quiet = quiet + 1 if not any(left.values()) else 0
        if quiet >= 3:
            return True, left
        time.sleep(2)
    return False, left


def _figures_text(f: dict[str, Any]) -> str:
    rss = ", ".join(f"{n} {v['start']}→{v['end']} MiB" for n, v in f["rss_mib"].items())
    return "\n".join(
        [
            f"seed {f['seed']}: {f['minutes']:g} min, {f['replicas']} replicas, "
            f"{f['runners']} runners; start {f['start_s']}s, heal {f['heal_s']}s, "
            f"drain {f['drain_s']}s ({'drained' if f['drained'] else 'NOT drained'}: "
            f"{f['left_at_drain_end']})",
            f"commands {f['commands']} ({f['commands_per_minute']}/min); sent {f['sent']}",
            f"jobs {f['jobs']} {f['jobs_by_status']}; deliveries {f['deliveries']}, "
            f"redelivered after a failure {f['redeliveries_after_failure']}",
            f"faults {f['faults']}" + (f"; fault errors {f['fault_errors']}"
                                       if f["fault_errors"] else ""),
            f"webhook p99 {f['webhook_p99_ms']} ms over {f['webhook_attempts_counted']} "
            f"attempts (outside PostgreSQL restarts)",
            _calls_text(f["github_calls"]),
            f"RSS {rss}; replica lives {f['replica_lives']}",
            "memory from minute 10 (longest life of each; witness never killed: "
            f"{f['witness']}): " + ", ".join(
                f"{n} {m['mib_from']}→{m['mib_to']} MiB ({m['change']:+.1%}, min "
                f"{m['from_minute']:.0f}–{m['to_minute']:.0f})"
                for n, m in f["memory"].items() if m["change"] is not None),
            f"database MiB {f['database_mib']}",
            *_curve_text(f.get("witness_curve") or []),
            f"load errors {f['load_errors']}" if f["load_errors"] else "",
            "errors logged (not invariants):",
            *(f"  {kind}: {n} × {text}" for kind, counts in f["logged_errors"].items()
              for text, n in sorted(counts.items(), key=lambda kv: -kv[1])[:8]),
        ]
    )  # fmt: skip


def witness_curve(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first replica's memory each minute as its probe saw it: RSS, what glibc's arenas
    hold in use and free, its arenas, threads and open files, Python's allocated blocks."""
    curve = []
    for s in samples:
        p = s.get("probe")
        if not p:
            continue
        curve.append({
            "minute": s["minute"],
            "rss_mib": round(p["rss_kib"] / 1024, 1),
            "malloc_used_mib": round(p.get("m_uordblks_kib", 0) / 1024, 1),
            "malloc_free_mib": round(p.get("m_fordblks_kib", 0) / 1024, 1),
            "malloc_mmapped_mib": round(p.get("m_hblkhd_kib", 0) / 1024, 1),
            "arenas": len(p.get("arenas_kib", [])),
            "threads": p["threads"],
            "fds": p["fds"],
            "py_blocks": p["py_blocks"],
            "py_arenas": p.get("ob_arenas"),
        })  # fmt: skip
    return curve


def _curve_text(curve: list[dict[str, Any]]) -> list[str]:
    if not curve:
        return []
    lines = ["witness by minute: RSS MiB | malloc in use / free / mmapped MiB | arenas | "
             "threads | fds | Python blocks, 1 MiB arenas"]  # fmt: skip
    lines += [
        f"  {c['minute']:6.1f}: {c['rss_mib']:6.1f} | {c['malloc_used_mib']:5.1f} / "
        f"{c['malloc_free_mib']:5.1f} / {c['malloc_mmapped_mib']:5.1f} | {c['arenas']:2d} | "
        f"{c['threads']:3d} | {c['fds']:3d} | {c['py_blocks']}, {c['py_arenas']}"
        for c in curve
    ]
    return lines


def _calls_text(calls: dict[str, Any]) -> str:
    if not calls.get("calls"):
        return "GitHub calls: none logged"
    floor = "" if calls["complete"] else "at least "
    return (
        f"GitHub calls: {floor}{calls['calls']} in {calls['span_min']} min "
        f"({calls['per_minute']}/min, {calls['per_hour_at_that_rate']}/h at that rate against "
        f"the App's 5,000/h; {calls['per_command']} a command); busiest {calls['busiest']}"
    )


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


if __name__ == "__main__":
    sys.exit(main())
