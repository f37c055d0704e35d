"""What the soak reads back at its end into a `Record`: the sandbox's store (deliveries with
their attempts, comments with every version and their reactions, statuses, check runs), the
jobs as the database has them (read only), and each runner's job starts and ends from its log
(written in UTC: the runners run with TZ=UTC)."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

from service.publish.low_budget import REACTION_LEFT_OUT
from tools.soak.events import (
    Attempt,
    CheckRunRec,
    CommentRec,
    DeliveryRec,
    JobRec,
    RunEvent,
    StatusRec,
)

LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \S+ \S+ (.*)$")
EVENTS = (
    (re.compile(r"slot \d+: job (\d+): (\S+) on \S+ at (\w+)"), "start"),
    (re.compile(r"slot \d+: job (\d+) (\w+)$"), "end"),
    (re.compile(r"job (\d+): (?:report|interrupt): (\w+)"), "reported"),
    (re.compile(r"job (\d+) is no longer held by this runner"), "dropped"),
    (re.compile(r"job (\d+): not held any more"), "dropped"),
    (re.compile(r"job (\d+): hand back: (\w+)"), "handed_back"),
)
# A runner's drain (the jobs that drained it) and its end: events of job 0.
DRAINED = re.compile(r"^drained: its last \d+ jobs ended in infrastructure errors: (.*); claiming")
UNDRAINED = re.compile(r"^undrained\b")
DRAINED_JOB = re.compile(r"\bjob (\d+) \(")


def _ts(text: str | None) -> float:
    if not text:
        return 0.0
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()


def github_view(
    state: dict[str, Any],
) -> tuple[list[DeliveryRec], list[CommentRec], list[StatusRec], list[CheckRunRec]]:
    """The sandbox's `GET /_sandbox/state` as records."""
    deliveries = []
    for d in state["deliveries"]:
        payload = d.get("payload") or {}
        comment = payload.get("comment") if isinstance(payload, dict) else None
        pull = payload.get("pull_request") if isinstance(payload, dict) else None
        repository = payload.get("repository") if isinstance(payload, dict) else None
        deliveries.append(
            DeliveryRec(
                id=d["id"],
                event=d["event"],
                action=d.get("action"),
                attempts=tuple(
                    Attempt(_ts(a["at"]), a["status_code"], int(a["duration_ms"]))
                    for a in d["attempts"]
                ),
                comment_id=int(comment["id"]) if isinstance(comment, dict) else None,
                repo=str((repository or {}).get("full_name") or ""),
                pr=int(pull["number"]) if isinstance(pull, dict) else 0,
                head=str(pull["head"]["sha"]) if isinstance(pull, dict) else "",
            )
        )
    comments = [
        CommentRec(
            id=c["id"],
            repo=c["repo"],
            pr=c["issue_number"],
            user=c["user"],
            body=c["body"],
            deleted=c["deleted"],
            bodies=tuple(h["body"] for h in c["history"]),
            reactions=tuple((r["user"], r["content"]) for r in c["reactions"]),
        )
        for c in state["comments"]
    ]
    statuses = [
        StatusRec(s["repo"], s["sha"], s["context"], s["state"], s["description"] or "",
                  s["target_url"], s["id"])
        for s in state["statuses"]
    ]  # fmt: skip
    runs = [
        CheckRunRec(r["id"], r["repo"], r["head_sha"], r["name"], r["external_id"], r["status"],
                    r["conclusion"], r.get("title") or "")
        for r in state.get("check_runs", ())
    ]  # fmt: skip
    return deliveries, comments, statuses, runs


def jobs(conninfo: str) -> list[JobRec]:
    """Every job, read in one read-only transaction."""
    query = (
        "SELECT id, repo, pr_number, sha, op, backend, status, attempt, reason, requested_by, "
        "command_comment_id, extract(epoch FROM created_at), extract(epoch FROM finished_at) "
        "FROM jobs ORDER BY id"
    )
    with psycopg.connect(conninfo) as conn:
        conn.read_only = True
        rows = conn.execute(query).fetchall()
    return [
        JobRec(
            id=row[0], repo=row[1], pr=row[2], sha=row[3], op=row[4], backend=row[5],
            status=row[6], attempt=row[7], reason=row[8], requested_by=row[9],
            command_comment_id=row[10], created_at=float(row[11]),
            finished_at=float(row[12]) if row[12] is not None else None,
        )
        for row in rows
    ]  # fmt: skip


def reactions_left_out(conninfo: str) -> list[int]:
    """The command comments whose 👀 the outbox left out while the hourly budget was low."""
    query = "SELECT payload->>'comment_id' FROM outbox WHERE kind = 'reaction' AND outcome LIKE %s"
    with psycopg.connect(conninfo) as conn:
        conn.read_only = True
        rows = conn.execute(query, (f"{REACTION_LEFT_OUT}%",)).fetchall()
    return sorted(int(row[0]) for row in rows)


def runner_events(logs: list[tuple[str, Path]]) -> list[RunEvent]:
    """Each runner's (name, log) lines about jobs, as events."""
    events = []
    for name, path in logs:
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            m = LINE.match(line)
            if not m:
                continue
            at = datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC)
            if drained := DRAINED.match(m.group(2)):
                ids = ",".join(DRAINED_JOB.findall(drained.group(1)))
                events.append(RunEvent(at.timestamp(), name, 0, "drained", ids))
                continue
            if UNDRAINED.match(m.group(2)):
                events.append(RunEvent(at.timestamp(), name, 0, "undrained", m.group(2)))
                continue
            for pattern, what in EVENTS:
                found = pattern.search(m.group(2))
                if found:
                    detail = found.group(2) if found.lastindex and found.lastindex > 1 else ""
                    events.append(RunEvent(at.timestamp(), name, int(found.group(1)), what, detail))
                    break
    return sorted(events, key=lambda e: e.at)


ANSWER = re.compile(r'"(?P<request>[A-Z]+ \S+) HTTP/[\d.]+" (?P<status>\d{3})\b')


def server_errors(logs: list[tuple[str, Path]]) -> tuple[int, list[str]]:
    """The answers in the replicas' access logs, and each 5xx among them but the 503 of a
    database outage: what a runner, GitHub or a person got instead of an answer."""
    answers, found = 0, []
    for name, path in logs:
        for line in path.read_text(errors="replace").splitlines():
            m = ANSWER.search(line)
            if m is None:
                continue
            answers += 1
            if m.group("status").startswith("5") and m.group("status") != "503":
                found.append(f"{name}: {m.group('status')} to {m.group('request')}")
    return answers, found


def deadlocks(postgres_log: Path) -> list[str]:
    """PostgreSQL's `deadlock detected` errors, each with the statement it ended."""
    try:
        lines = postgres_log.read_text(errors="replace").splitlines()
    except OSError:
        return []
    found = []
    for i, line in enumerate(lines):
        if "ERROR:  deadlock detected" in line:
            pid = line.split("]")[0] + "]"  # `2026-… UTC [11263`
            statement = next(
                (ln for ln in lines[i + 1 : i + 60] if ln.startswith(pid) and "STATEMENT:" in ln),
                "",
            )
            found.append(f"{line[:23]} {statement.split('STATEMENT:')[-1].strip()[:120]}")
    return found


def log_findings(directory: Path) -> dict[str, dict[str, int]]:
    """The errors the processes logged, by process kind and message (numbers, ids and
    addresses blanked so that one kind of error counts once): not invariants, but where a
    clean table may still hide a fault (PostgreSQL's `deadlock detected`, a traceback)."""
    findings: dict[str, dict[str, int]] = {}
    for path in sorted(directory.glob("*.log")):
        kind = re.sub(r"-\d+$", "", path.stem)
        counts = findings.setdefault(kind, {})
        for line in path.read_text(errors="replace").splitlines():
            if kind == "postgres":
                found = re.search(r"\b(ERROR|PANIC):\s+(.*)", line)
                text = found.group(0) if found else None
            elif "Traceback" in line or re.search(r"(^|\s)(ERROR|CRITICAL)\s", line):
                text = LINE.sub(r"\2", line)
            else:
                text = None
            if text:
                key = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}|\d+(\.\d+)?", "N", text)[:160]
                counts[key] = counts.get(key, 0) + 1
    return {kind: counts for kind, counts in findings.items() if counts}


KEPT_CALLS = 2000  # the sandbox keeps its newest 2000 REST calls
_ID = re.compile(r"/\d+(?=/|$)")


def github_calls(state: dict[str, Any], commands: int, minutes: float) -> dict[str, Any]:
    """The service's REST calls to GitHub as the sandbox logged them (its newest 2000: a
    longer run's count is a floor): how many, a minute and a command, and the busiest
    endpoints (ids as N). GitHub grants an App installation 5,000 calls an hour."""
    calls = [c for c in state.get("api_calls", []) if c.get("login")]
    if not calls:
        return {"calls": 0}
    ats = sorted(datetime.fromisoformat(str(c["at"]).replace("Z", "+00:00")) for c in calls)
    span_min = max((ats[-1] - ats[0]).total_seconds() / 60, 1e-9)
    endpoints = Counter(f"{c['method']} {_ID.sub('/N', c['path'].split('?')[0])}" for c in calls)
    return {
        "calls": len(calls),
        "complete": len(state.get("api_calls", [])) < KEPT_CALLS,
        "span_min": round(span_min, 1),
        "per_minute": round(len(calls) / span_min, 1),
        "per_hour_at_that_rate": round(len(calls) / span_min * 60),
        "per_command": round(len(calls) / span_min * minutes / commands, 2) if commands else None,
        "busiest": dict(endpoints.most_common(10)),
    }


def pending(conninfo: str) -> dict[str, int]:
    """What the service has not finished: jobs queued or running, deliveries and outbox items
    not done."""
    query = (
        "SELECT (SELECT count(*) FROM jobs WHERE status IN ('queued', 'running')), "
        "(SELECT count(*) FROM deliveries WHERE done_at IS NULL), "
        "(SELECT count(*) FROM outbox WHERE done_at IS NULL)"
    )
    with psycopg.connect(conninfo) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return {"jobs": int(row[0]), "deliveries": int(row[1]), "outbox": int(row[2])}


class Sampler:
    """Once a minute while the load runs: each replica's resident memory (with its life, so
    a restarted replica starts a new series) and the database's size, for the leak bars."""

    def __init__(self, replicas: list[Any], conninfo: str, probe: Path | None = None) -> None:
        self.replicas = replicas
        self.conninfo = conninfo
        self.probe = probe  # the first replica's own look at its memory (memtrace/probe.py)
        self.samples: list[dict[str, Any]] = []

    def sample(self, minute: float) -> None:
        rss = {r.name: {"life": r.lives, "mib": r.rss_mib()} for r in self.replicas}
        self.samples.append(
            {"minute": minute, "rss": rss, **self._database(), "probe": self._probe()}
        )

    def _probe(self) -> dict[str, Any] | None:
        """The probe's latest line, if it wrote one."""
        if self.probe is None:
            return None
        try:
            lines = self.probe.read_text().splitlines()
            return json.loads(lines[-1]) if lines else None
        except (OSError, ValueError):
            return None

    def _database(self) -> dict[str, Any]:
        try:
            with psycopg.connect(self.conninfo) as conn:
                size = conn.execute("SELECT pg_database_size(current_database())").fetchone()
                count = conn.execute("SELECT count(*) FROM jobs").fetchone()
        except psycopg.Error:
            return {"database_mib": None, "jobs": None}  # a restart under way
        return {
            "database_mib": round(size[0] / 2**20, 1) if size else None,
            "jobs": count[0] if count else None,
        }

    def memory(self) -> dict[str, dict[str, Any]]:
        """Per replica, its longest life's RSS at its first sample from minute 10 on and at its
        last sample, and the change between them (a leak grows it)."""
        out: dict[str, dict[str, Any]] = {}
        for name in {n for s in self.samples for n in s["rss"]}:
            lives: dict[int, list[tuple[float, float]]] = {}
            for s in self.samples:
                entry = s["rss"].get(name)
                if entry and entry["mib"] is not None:
                    lives.setdefault(entry["life"], []).append((s["minute"], entry["mib"]))
            series = max(lives.values(), key=lambda v: v[-1][0] - v[0][0], default=[])
            late = [p for p in series if p[0] >= 10] or series[-1:]
            if not late:
                continue
            (m0, r0), (m1, r1) = late[0], series[-1]
            out[name] = {
                "from_minute": m0,
                "to_minute": m1,
                "mib_from": r0,
                "mib_to": r1,
                "change": round((r1 - r0) / r0, 3) if r0 else None,
                "lives": len(lives),
            }
        return dict(sorted(out.items()))

    def database(self) -> dict[str, Any]:
        """The database's size and job count over the run: first, at minute 10, last, peak."""
        known = [s for s in self.samples if s["database_mib"] is not None]
        if not known:
            return {}
        at10 = next((s for s in known if s["minute"] >= 10), known[-1])
        last = known[-1]
        grown = last["database_mib"] - at10["database_mib"]
        jobs = (last["jobs"] or 0) - (at10["jobs"] or 0)
        return {
            "first": known[0]["database_mib"],
            "minute_10": at10["database_mib"],
            "last": last["database_mib"],
            "peak": max(s["database_mib"] for s in known),
            "jobs_last": last["jobs"],
            "kib_per_job_after_minute_10": round(grown * 1024 / jobs, 1) if jobs > 0 else None,
        }
