"""The one check a repository can require for merging: `ondemand`, one per tested head (a pull
request's head, or a merge group's), whatever operators and backends its jobs ran. Branch
protection can only require checks it knows in advance; the per-job checks
(`ondemand/<op>:<backend>`) depend on the change, so this one stands for all of them.

Pending while any of the head's jobs is queued or running; a failure when any job's own
check fails (the failures the repository gates on, an unaccepted regression, an error, a
timeout); cancelled when a job was cancelled and nothing failed (nothing was said about that
code: run it again); success when every job passed, or when nothing needed testing. Each
target counts by its latest job at the head. Pure: plain functions over frozen data.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from report.checks import check_state
from report.markdown import escape_text, link, one_line, plural
from report.summary import summary
from report.views import CheckRunUpdate, JobView
from workflows.models import JobStatus

HEAD_CHECK = "ondemand"
MAX_LISTED = 100  # jobs listed in the check's summary; the rest are counted
# A job's check conclusion → the worst first, for the head's verdict.
SEVERITY = ("failure", "timed_out", "cancelled", "neutral", "success")


@dataclass(frozen=True)
class HeadVerdict:
    """What the head's one check says: `status` and `conclusion` as a check run has them,
    `title` one line, `summary` Markdown listing the jobs."""

    status: str
    conclusion: str | None
    title: str
    summary: str


def latest_per_target(jobs: Sequence[JobView]) -> list[JobView]:
    """Each (operator, backend)'s latest job, in the order targets first appeared."""
    latest: dict[tuple[str, str], JobView] = {}
    for job in sorted(jobs, key=lambda j: j.id):
        latest[(job.op, job.backend)] = job
    return list(latest.values())


def head_verdict(jobs: Sequence[JobView], nothing: str | None = None) -> HeadVerdict:
    """The head's verdict over its jobs; `nothing` says why no job was needed (success when
    there is no job at all)."""
    current = [j for j in latest_per_target(jobs) if j.status is not JobStatus.superseded]
    if not current:
        if jobs:  # every job was superseded: the pull request moved on
            title = "superseded: the pull request moved on before its jobs ran"
            return HeadVerdict("completed", "neutral", title, title + ".\n")
        why = nothing or "nothing was asked to run on this commit"
        return HeadVerdict("completed", "success", f"nothing to test: {why}", f"{why}.\n")
    checks = [(job, *check_state(job)) for job in current]
    waiting = [job for job, status, _ in checks if status != "completed"]
    counts = Counter(conclusion for _, _, conclusion in checks if conclusion is not None)
    words = _counts(len(waiting), counts)
    if waiting:
        return HeadVerdict("in_progress", None, words, _summary(checks, words))
    worst = min(counts, key=SEVERITY.index)
    return HeadVerdict("completed", worst, words, _summary(checks, words))


def _counts(waiting: int, counts: Counter[str]) -> str:
    """`1 failed · 2 passed · 1 waiting`."""
    parts = []
    names = {
        "failure": "failed",
        "timed_out": "timed out",
        "cancelled": "cancelled",
        "neutral": "neutral",
        "success": "passed",
    }
    for conclusion in SEVERITY:
        if counts[conclusion]:
            parts.append(f"{counts[conclusion]} {names[conclusion]}")
    if waiting:
        parts.append(f"{waiting} queued or running")
    total = waiting + sum(counts.values())
    return f"{plural(total, 'job')}: " + " · ".join(parts)


_ICON = {
    "failure": "❌",
    "timed_out": "⏱️",
    "cancelled": "⛔",
    "neutral": "➖",
    "success": "✅",
    None: "⏳",
}


def _summary(checks: Sequence[tuple[JobView, str, str | None]], words: str) -> str:
    ordered = sorted(checks, key=lambda c: (SEVERITY.index(c[2]) if c[2] else -1, c[0].id))
    lines = [f"**{escape_text(words, 200)}**", ""]
    for job, _, conclusion in ordered[:MAX_LISTED]:
        name = f"`{job.op}` on `{job.backend}`"
        # A job on its way is named, not described: its claim and progress then change
        # nothing here, and cost no call of the hourly budget (its own check shows them).
        said = f": {escape_text(summary(job), 300)}" if conclusion is not None else ""
        lines.append(f"- {_ICON[conclusion]} {name}{said} · {link(f'job #{job.id}', job.job_url)}")
    if len(ordered) > MAX_LISTED:
        lines.append(f"- … {len(ordered) - MAX_LISTED} more")
    return "\n".join(lines) + "\n"


def render_head_check(
    sha: str, jobs: Sequence[JobView], details_url: str, nothing: str | None = None
) -> CheckRunUpdate:
    """The head's `ondemand` check run."""
    verdict = head_verdict(jobs, nothing)
    return CheckRunUpdate(
        name=HEAD_CHECK,
        head_sha=sha,
        external_id=f"head:{sha}",
        details_url=details_url,
        status=verdict.status,
        conclusion=verdict.conclusion,
        title=one_line(verdict.title, 200),
        summary=verdict.summary,
        text="",
    )
