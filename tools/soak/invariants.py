"""The soak's invariants: plain functions over a `Record`, judged from what GitHub shows (the
database's jobs only map a comment, status or check run to the job it speaks for). Each
returns a `Check`: how many things it looked at and every violation, in words a person can
act on. Nothing here does I/O; `tests/tools/test_soak_invariants.py` plants each kind of
violation in a recorded log and a clean log passes."""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from tools.soak.events import CommentRec, JobRec, Record, RunEvent

RESULT_MARKER = re.compile(r"^<!-- ondemand:(?P<op>[a-z_][a-z0-9_]*):(?P<backend>[a-z0-9_-]+) -->")
REPLY_MARKER = re.compile(r"^<!-- ondemand:reply:(?P<tag>\S+) -->")
ANY_MARKER = re.compile(r"^<!-- ondemand:\S+ -->")
JOB_LINK = re.compile(r"job #(\d+)")
FINAL = frozenset({"succeeded", "failed", "errored", "timed_out", "cancelled", "superseded"})
STOPPED = frozenset({"cancelled", "superseded"})
# What the headline of a job in each state starts with (an unknown operator's failure: ⚠️).
EMOJI: dict[str, tuple[str, ...]] = {
    "queued": ("⏳",),
    "running": ("🏃",),
    "succeeded": ("✅",),
    "failed": ("❌", "⚠️"),
    "errored": ("⚠️",),
    "timed_out": ("⚠️",),
    "cancelled": ("⛔",),
    "superseded": ("⛔",),
}
FINAL_EMOJI = ("✅", "❌", "⚠️", "⛔")
CHECK_CONCLUSIONS = {"cancelled": ("cancelled",), "superseded": ("neutral",)}
VERDICT_STATES = frozenset({"succeeded", "failed", "errored", "timed_out"})
RAN = frozenset({"succeeded", "failed", "timed_out"})  # a job that ran its steps on a runner
LEFT_SETTLE_S = 20.0  # a push's or close's delivery is taken in (and its jobs stopped) by then
RUN_SLACK_S = 1.0  # a runner's log and the database stamp the same moment this far apart
PG_SETTLE_S = 5.0  # after PostgreSQL is back, connections are made again for this long


@dataclass(frozen=True)
class Check:
    """One invariant's verdict: `checked` things looked at, each violation in words."""

    name: str
    checked: int
    violations: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.violations


@dataclass(frozen=True)
class Shown:
    """A result comment's version as it reads: the job it names first and its headline."""

    job_id: int | None
    headline: str

    @property
    def final(self) -> bool:
        return self.headline.startswith(FINAL_EMOJI)


def shown(body: str) -> Shown:
    """The job a result comment's body is about (its first `job #N`) and its headline."""
    headline = next((ln[4:] for ln in body.splitlines() if ln.startswith("### ")), "")
    found = JOB_LINK.search(body)
    return Shown(int(found.group(1)) if found else None, headline)


def _bot_comments(r: Record) -> list[CommentRec]:
    return [c for c in r.comments if c.user == r.bot and not c.deleted]


def _jobs_by_target(r: Record) -> dict[tuple[str, int, str, str], list[JobRec]]:
    targets: dict[tuple[str, int, str, str], list[JobRec]] = defaultdict(list)
    for job in sorted(r.jobs, key=lambda j: j.id):
        targets[(job.repo, job.pr, job.op, job.backend)].append(job)
    return targets


def _result_comments(r: Record) -> dict[tuple[str, int, str, str], list[CommentRec]]:
    found: dict[tuple[str, int, str, str], list[CommentRec]] = defaultdict(list)
    for c in _bot_comments(r):
        m = RESULT_MARKER.match(c.body)
        if m:
            found[(c.repo, c.pr, m.group("op"), m.group("backend"))].append(c)
    return found


def _plain(text: str) -> str:
    """Rendered Markdown's text without its escapes (`\\_`, a mention's word joiner)."""
    return re.sub(r"\\(.)", r"\1", text).replace("\u2060", "")


# -- the invariants ---------------------------------------------------------------------------


def commands_answered(r: Record) -> Check:
    """Every command the tool sent got one 👀 from the bot (none where the outbox left it out
    while the hourly budget was low) and an answer: a job it made, or a reply (keyed by the
    command's delivery)."""
    eyes: dict[int, int] = {}
    for c in r.comments:
        eyes[c.id] = sum(1 for user, content in c.reactions if user == r.bot and content == "eyes")
    replied = set()
    for c in _bot_comments(r):
        m = REPLY_MARKER.match(c.body)
        if m:
            replied.add(m.group("tag").split(":")[0])
    deliveries: dict[int, list[str]] = defaultdict(list)
    for d in r.deliveries:
        if d.event == "issue_comment" and d.action == "created" and d.comment_id is not None:
            deliveries[d.comment_id].append(d.id)
    jobs = {j.command_comment_id for j in r.jobs if j.command_comment_id is not None}
    commands = [s for s in r.sent if s.command and s.comment_id is not None]
    left_out = set(r.reactions_left_out)
    bad = []
    for s in commands:
        assert s.comment_id is not None
        where = f"{s.repo}#{s.pr} comment {s.comment_id} ({s.kind}: {_short(s.body)})"
        wanted = 0 if s.comment_id in left_out else 1
        if eyes.get(s.comment_id, 0) != wanted:
            bad.append(f"{where}: {eyes.get(s.comment_id, 0)} 👀 from the bot")
        answered = s.comment_id in jobs or any(d in replied for d in deliveries[s.comment_id])
        if not answered:
            bad.append(f"{where}: no job and no reply")
    return Check("every accepted command answered", len(commands), tuple(bad))


def one_result_comment(r: Record) -> Check:
    """Each (repository, pull request, operator, backend) that has jobs has exactly one result
    comment by the bot, and it shows the target's latest job with that job's verdict."""
    comments = _result_comments(r)
    bad = []
    targets = _jobs_by_target(r)
    for target, jobs in targets.items():
        repo, pr, op, backend = target
        where = f"{repo}#{pr} {op}:{backend}"
        found = comments.get(target, [])
        if len(found) != 1:
            bad.append(f"{where}: {len(found)} result comments")
            continue
        latest = jobs[-1]
        now = shown(found[0].body)
        if now.job_id != latest.id:
            bad.append(f"{where}: the comment shows job #{now.job_id}, the latest is #{latest.id}")
        elif not now.headline.startswith(EMOJI.get(latest.status, ("?",))):
            bad.append(
                f"{where}: job #{latest.id} is {latest.status}, the comment says "
                f"{_short(now.headline)}"
            )
    return Check("one result comment per target, with its verdict", len(targets), tuple(bad))


def no_duplicates(r: Record) -> Check:
    """No comment of the bot twice (result, reply or note: one per marker and pull request),
    no check run twice for one job, no verdict status posted twice for one job, no 👀 twice."""
    bad = []
    markers = Counter(
        (c.repo, c.pr, m.group(0)) for c in _bot_comments(r) if (m := ANY_MARKER.match(c.body))
    )
    bad += [f"{repo}#{pr}: {n} comments {marker}" for (repo, pr, marker), n in markers.items()
            if n > 1]  # fmt: skip
    runs = Counter((c.repo, c.external_id) for c in r.check_runs)
    bad += [f"{repo}: {n} check runs for job #{ext}" for (repo, ext), n in runs.items() if n > 1]
    by_job: dict[tuple[str, str, str, str | None], list[tuple[int, str, str]]] = defaultdict(list)
    for s in r.statuses:
        by_job[(s.repo, s.sha, s.context, s.target_url)].append((s.id, s.state, s.description))
    for (repo, sha, context, url), posted in by_job.items():
        last = max(posted)[1:]
        n = sum(1 for p in posted if p[1:] == last)
        if n > 1 and last[0] != "pending":
            bad.append(f"{repo}@{sha[:7]} {context} ({url}): verdict {last} posted {n} times")
    for c in r.comments:
        n = sum(1 for user, content in c.reactions if user == r.bot and content == "eyes")
        if n > 1:
            bad.append(f"{c.repo}#{c.pr} comment {c.id}: {n} 👀")
    checked = len(markers) + len(runs) + len(by_job)
    return Check("no duplicate comment, status, check run or 👀", checked, tuple(bad))


def no_run_after_verdict(r: Record) -> Check:
    """No job started on a runner after its final result was recorded, and no result comment
    went from a job's verdict back to that job running or queued."""
    jobs = {j.id: j for j in r.jobs}
    bad = []
    starts = [e for e in r.runs if e.what == "start"]
    for e in starts:
        job = jobs.get(e.job_id)
        if job is not None and job.finished_at is not None and e.at > job.finished_at + RUN_SLACK_S:
            bad.append(
                f"job #{e.job_id} started on {e.runner} {e.at - job.finished_at:.1f}s after its "
                f"verdict ({job.status})"
            )
    for comments in _result_comments(r).values():
        for c in comments:
            final: set[int] = set()
            for body in c.bodies or (c.body,):
                s = shown(body)
                if s.job_id is None:
                    continue
                if s.final:
                    final.add(s.job_id)
                elif s.job_id in final:
                    bad.append(
                        f"{c.repo}#{c.pr} comment {c.id}: job #{s.job_id} shown running again "
                        f"after its verdict ({_short(s.headline)})"
                    )
                    break
    return Check("no job run again after its verdict", len(starts), tuple(bad))


def outsiders_never_ran(r: Record) -> Check:
    """No job from a comment of someone who may not start jobs, nor from a comment with no
    command in it (code, quotes, hostile text)."""
    refused = {s.comment_id for s in r.sent if not s.trusted and s.comment_id is not None}
    inert = {s.comment_id for s in r.sent if not s.command and s.comment_id is not None}
    bad = []
    for job in r.jobs:
        who = f"job #{job.id} ({job.repo}#{job.pr} {job.op}, {job.status})"
        if job.requested_by in r.outsiders or job.command_comment_id in refused:
            bad.append(f"{who} was started by {job.requested_by}, who may not")
        elif job.command_comment_id in inert:
            bad.append(f"{who} came from comment {job.command_comment_id}, which has no command")
    return Check("outsiders and non-commands never ran", len(r.jobs), tuple(bad))


def all_terminal(r: Record) -> Check:
    """Every job ended, and GitHub shows it ended: its check run completed, or its last
    commit status not left pending while its verdict is not."""
    bad = [f"job #{j.id} ({j.repo}#{j.pr} {j.op}) is still {j.status}" for j in r.jobs
           if j.status not in FINAL]  # fmt: skip
    runs = {(c.repo, c.external_id): c for c in r.check_runs}
    last_status = _last_status_by_job(r)
    for job in r.jobs:
        if job.status not in FINAL:
            continue
        if r.mode == "app":
            run = runs.get((job.repo, str(job.id)))
            if run is None:
                bad.append(f"job #{job.id} has no check run")
            elif run.status != "completed":
                bad.append(f"job #{job.id} is {job.status}; its check run is {run.status}")
        else:
            status = last_status.get(job.id)
            if status is None:
                bad.append(f"job #{job.id} has no commit status")
            elif status[0] == "pending" and job.status not in STOPPED:
                bad.append(f"job #{job.id} is {job.status}; its status is pending ({status[1]})")
    return Check("every job terminal, on GitHub too", len(r.jobs), tuple(bad))


def stopped_say_so(r: Record) -> Check:
    """A cancelled or superseded job says so: its check run's conclusion (cancelled, neutral)
    or its status's description, and its line in the result comment (⛔ and why)."""
    runs = {(c.repo, c.external_id): c for c in r.check_runs}
    last_status = _last_status_by_job(r)
    comments = _result_comments(r)
    stopped = [j for j in r.jobs if j.status in STOPPED]
    bad = []
    for job in stopped:
        why = (job.reason or job.status).split()[0]
        where = f"job #{job.id} ({job.status}: {job.reason})"
        if r.mode == "app":
            run = runs.get((job.repo, str(job.id)))
            if run is None or run.conclusion not in CHECK_CONCLUSIONS[job.status]:
                bad.append(f"{where}: check run {run.conclusion if run else 'missing'}")
        else:
            status = last_status.get(job.id)
            if status is None or why not in status[1]:
                bad.append(f"{where}: status says {status}")
        found = comments.get((job.repo, job.pr, job.op, job.backend), [])
        line = _line_of(found[0].body, job.id) if len(found) == 1 else None
        if line is not None and not ("⛔" in line and why in _plain(line)):
            bad.append(f"{where}: the comment says {_short(line)}")
    return Check("cancelled and superseded jobs say so", len(stopped), tuple(bad))


def no_lost_deliveries(r: Record) -> Check:
    """Every delivery GitHub sent was answered 2xx at last (redeliveries included)."""
    bad = []
    for d in r.deliveries:
        if not any(a.status is not None and 200 <= a.status < 300 for a in d.attempts):
            statuses = [a.status for a in d.attempts]
            bad.append(f"delivery {d.id} ({d.event} {d.action}) never answered 2xx: {statuses}")
    return Check("no delivery lost", len(r.deliveries), tuple(bad))


def no_verdict_on_a_head_left(r: Record) -> Check:
    """No job ran to a verdict on a head its pull request had been pushed away from, or on a
    pull request that was closed, once the service had had `LEFT_SETTLE_S` (and any time
    PostgreSQL was restarting) to take in GitHub's delivery of that push or close: it
    supersedes or cancels them then."""
    heads: dict[tuple[str, int], list[tuple[float, str]]] = defaultdict(list)
    closed: dict[tuple[str, int], float] = {}
    for s in sorted(r.sent, key=lambda s: s.at):
        if s.kind in ("open", "push"):
            heads[(s.repo, s.pr)].append((s.at, s.detail))
        elif s.kind == "close":
            closed[(s.repo, s.pr)] = s.at
    answered: dict[tuple[str, str, int, str], float] = {}
    for d in r.deliveries:
        done = [a.at for a in d.attempts if a.status is not None and 200 <= a.status < 300]
        if d.event == "pull_request" and done:
            key = (d.action or "", d.repo, d.pr, d.head if d.action == "synchronize" else "")
            answered[key] = min([*done, answered.get(key, done[0])])
    outages = [(f.start, f.end + PG_SETTLE_S) for f in r.faults if f.kind == "pg_restart"]
    judged = [j for j in r.jobs if j.status in VERDICT_STATES and j.finished_at is not None]
    bad = []
    for job in judged:
        assert job.finished_at is not None
        seq = [sha for _, sha in heads.get((job.repo, job.pr), [])]
        left: list[tuple[float, str]] = []
        if job.sha in seq and seq.index(job.sha) + 1 < len(seq):
            after = seq[seq.index(job.sha) + 1]
            at = answered.get(("synchronize", job.repo, job.pr, after))
            if at is not None:
                left.append((at, f"the push of {after[:7]}"))
        if (job.repo, job.pr) in closed:
            at = answered.get(("closed", job.repo, job.pr, ""))
            if at is not None:
                left.append((at, "the close"))
        for at, what in left:
            late = job.finished_at - at
            down = sum(max(0.0, min(e, job.finished_at) - max(s, at)) for s, e in outages)
            if late - down > LEFT_SETTLE_S:
                bad.append(
                    f"job #{job.id} ({job.repo}#{job.pr} {job.op} at {job.sha[:7]}) "
                    f"{job.status} {late:.0f}s after {what} was delivered ({down:.0f}s of it "
                    "PostgreSQL's restart)"
                )
                break
    return Check("no verdict on a head the pull request left", len(judged), tuple(bad))


HEAD_CHECK = "ondemand"
# A job's check conclusion → the worst first: the head's one check is its jobs' worst.
SEVERITY = ("failure", "timed_out", "cancelled", "neutral", "success")


def one_head_check(r: Record) -> Check:
    """As an App, every head that ran a job carries exactly one `ondemand` check run, and
    what it says is what its jobs' own check runs say, read from GitHub: each target's latest
    job there (superseded ones left out) — completed, with the worst of their conclusions."""
    if r.mode != "app":
        return Check("one ondemand check per head, matching its jobs", 0, ())
    heads: dict[tuple[str, str], list[str]] = defaultdict(list)
    job_runs: dict[tuple[str, str], str | None] = {}
    for run in r.check_runs:
        if run.name == HEAD_CHECK:
            heads[(run.repo, run.head_sha)].append(run.conclusion or run.status)
        else:
            job_runs[(run.repo, run.external_id)] = run.conclusion
    latest: dict[tuple[str, str], dict[tuple[str, str], JobRec]] = defaultdict(dict)
    for job in sorted(r.jobs, key=lambda j: j.id):
        latest[(job.repo, job.sha)][(job.op, job.backend)] = job
    bad = []
    for (repo, sha), targets in latest.items():
        where = f"{repo}@{sha[:7]}"
        found = heads.get((repo, sha), [])
        if len(found) != 1:
            bad.append(f"{where}: {len(found)} `ondemand` check runs, not one")
            continue
        current = [j for j in targets.values() if j.status != "superseded"]
        if not current:
            continue  # every job superseded: the pull request moved on (neutral)
        said = [job_runs.get((repo, str(j.id))) for j in current]
        if any(c is None for c in said):
            continue  # a job's own check never completed: `all_terminal` says so
        worst = min((c for c in said if c is not None), key=SEVERITY.index)
        if found[0] != worst:
            jobs = ", ".join(f"#{j.id} {c}" for j, c in zip(current, said, strict=True))
            bad.append(f"{where}: `ondemand` says {found[0]}; its jobs ({jobs}) say {worst}")
    return Check("one ondemand check per head, matching its jobs", len(latest), tuple(bad))


def verdicts_match_the_code(r: Record) -> Check:
    """Each job that ran to a verdict has its code's (the soak's operators pass or fail by
    design): a verdict on the wrong job would show here."""
    judged = [j for j in r.jobs if j.status in ("succeeded", "failed") and j.op in r.expected]
    bad = [
        f"job #{j.id} ({j.repo}#{j.pr} {j.op}) {j.status}; its code is {r.expected[j.op]}"
        for j in judged
        if j.status != r.expected[j.op]
    ]
    return Check("verdicts match the code", len(judged), tuple(bad))


def broken_runners_drained(r: Record) -> Check:
    """A runner that cannot run its jobs (its job Python gone: `runner_python`) hands each
    back and is drained after `r.drain_after` of them in a row (after one, on probation after
    its own check undrained it), by jobs it handed back; a drained runner starts no job until
    it is undrained; a job handed back and requeued never runs again on the runner that handed
    it back, and ends: on another runner, or stopped before it ran there. With the other
    invariants (every job ended, none ran after its verdict) none is lost or run twice."""
    jobs = {j.id: j for j in r.jobs}
    by_runner: dict[str, list[RunEvent]] = defaultdict(list)
    for e in sorted(r.runs, key=lambda e: e.at):
        by_runner[e.runner].append(e)
    bad = []
    for runner, events in by_runner.items():
        mine = {e.job_id for e in events if e.what == "handed_back"}
        since: float | None = None  # drained since
        probation = False  # undrained by its own check: the next lost job drains it
        streak = 0  # jobs handed back in a row
        for e in events:
            if e.what == "drained":
                ids = [int(i) for i in e.detail.split(",") if i]
                wanted = 1 if probation else r.drain_after
                if len(ids) != wanted or not set(ids) <= mine:
                    bad.append(f"{runner} drained by jobs {ids}: not {wanted} it handed back")
                since = e.at
            elif e.what == "undrained":
                since, streak = None, 0
                probation = "environment check" in e.detail
            elif e.what == "start" and since is not None:
                bad.append(f"{runner} started job #{e.job_id} {e.at - since:.1f}s after its drain")
            elif e.what == "handed_back":
                streak += 1
                if since is None and streak >= r.drain_after:
                    bad.append(f"{runner} handed back {streak} jobs in a row, still not drained")
            elif e.what == "end" and e.detail in RAN:
                streak, probation = 0, False
    handed = [e for e in r.runs if e.what == "handed_back"]
    for e in handed:
        job = jobs.get(e.job_id)
        where = f"job #{e.job_id} handed back by {e.runner}"
        if job is None or job.status not in FINAL:
            bad.append(f"{where} is {job.status if job else 'missing'}")
            continue
        # From its start there: the service requeues it before the runner logs its answer.
        starts = [s for s in r.runs if s.what == "start" and s.job_id == e.job_id]
        began = max((s.at for s in starts if s.runner == e.runner and s.at <= e.at), default=e.at)
        later = [s for s in starts if s.at > began]
        if any(s.runner == e.runner for s in later):
            bad.append(f"{where} ran again on {e.runner}")
        if e.detail == "queued" and not later and job.status not in STOPPED:
            bad.append(f"{where} was requeued but never ran again, and is {job.status}")
    checked = len(handed) + sum(1 for e in r.runs if e.what == "drained")
    return Check("broken runners drained, their jobs run elsewhere", checked, tuple(bad))


def no_internal_errors(r: Record) -> Check:
    """The service never answered 500 (a 503 says the database is away: expected)."""
    return Check("no 500 from the service", r.server_answers, tuple(r.server_errors))


def no_deadlocks(r: Record) -> Check:
    """PostgreSQL never ended a transaction of the replicas as a deadlock (the service takes
    one for an outage: 503s and a "database unreachable" for a database that is there)."""
    return Check("no deadlock in PostgreSQL", len(r.jobs), tuple(r.deadlocks))


def malformed_refused(r: Record) -> Check:
    """What GitHub never sends (a forged signature, a body that is not JSON) was refused with
    the answer that says so, never stored and never a 5xx."""
    direct = [s for s in r.sent if s.kind == "direct"]
    bad = []
    for s in direct:
        m = re.search(r"expected (\d+), answered (\S+)", s.detail)
        if m is None or m.group(1) != m.group(2):
            bad.append(f"{s.detail}")
    return Check("deliveries GitHub never sent refused", len(direct), tuple(bad))


INVARIANTS: tuple[Callable[[Record], Check], ...] = (
    commands_answered,
    one_result_comment,
    no_duplicates,
    no_run_after_verdict,
    outsiders_never_ran,
    all_terminal,
    stopped_say_so,
    no_verdict_on_a_head_left,
    no_lost_deliveries,
    verdicts_match_the_code,
    one_head_check,
    broken_runners_drained,
    no_internal_errors,
    no_deadlocks,
    malformed_refused,
)


def check_all(r: Record) -> list[Check]:
    return [invariant(r) for invariant in INVARIANTS]


# -- figures ----------------------------------------------------------------------------------


def webhook_p99_ms(r: Record, exclude: Iterable[str] = ("pg_restart",)) -> tuple[float | None, int]:
    """The 99th percentile of the deliveries' answered attempts in ms, leaving out those that
    overlap a fault of a kind in `exclude` (PostgreSQL's restart and the seconds after it);
    (p99, attempts counted)."""
    windows = [(f.start, f.end + PG_SETTLE_S) for f in r.faults if f.kind in exclude]
    times = sorted(
        a.ms
        for d in r.deliveries
        for a in d.attempts
        if a.status is not None
        and not any(a.at - a.ms / 1000 <= end and a.at >= start for start, end in windows)
    )
    if not times:
        return None, 0
    return float(times[min(len(times) - 1, int(0.99 * len(times)))]), len(times)


def render_table(checks: Sequence[Check], limit: int = 5) -> str:
    """The verdicts as a Markdown table, then up to `limit` violations of each failed one."""
    lines = ["| invariant | checked | violations | |", "|---|---|---|---|"]
    for c in checks:
        lines.append(f"| {c.name} | {c.checked} | {len(c.violations)} | {'✅' if c.ok else '❌'} |")
    for c in checks:
        for v in c.violations[:limit]:
            lines.append(f"- {c.name}: {v}")
        if len(c.violations) > limit:
            lines.append(f"- {c.name}: … {len(c.violations) - limit} more")
    return "\n".join(lines)


def _last_status_by_job(r: Record) -> dict[int, tuple[str, str]]:
    last: dict[int, tuple[int, str, str]] = {}
    for s in r.statuses:
        found = re.search(r"/jobs/(\d+)", s.target_url or "")
        if found:
            job_id = int(found.group(1))
            if job_id not in last or s.id > last[job_id][0]:
                last[job_id] = (s.id, s.state, s.description)
    return {job_id: (state, text) for job_id, (_, state, text) in last.items()}


def _line_of(body: str, job_id: int) -> str | None:
    """The headline or history line of a result comment that speaks of `job_id`."""
    now = shown(body)
    if now.job_id == job_id:
        return now.headline
    return next((ln for ln in body.splitlines() if f"job #{job_id}]" in ln), None)


def _short(text: str | None, limit: int = 80) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
