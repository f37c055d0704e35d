"""What the default branch's alerts say: the comment on a merged pull request that made rows
slower, the one issue per operator and backend (its title, its body with each row slower and
whether it recovered, its marker and label) and the comment that closes it. Pure: plain
functions over frozen dataclasses; every name that came from a run is escaped."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from report.markdown import code_span, escape_text, link, short_sha
from report.verdicts import band_text, percent
from workflows.models import Change
from workflows.repo_config import format_threshold

ISSUE_LABEL = "ondemand:regression"
SLOWER, DRIFT = "slower", "drift"


def issue_marker(op: str, backend: str) -> str:
    """The first line of the bot's issue for (operator, backend): found again by it."""
    return f"<!-- ondemand:regression:{op}:{backend} -->"


def alert_tag(sha: str, op: str, backend: str) -> str:
    """Once per merge commit, operator and backend: the alert comment's reply tag."""
    return f"regression-{sha[:12]}-{op}-{backend}"


@dataclass(frozen=True)
class RowFound:
    """One row a run found slower: `kind` slower (this commit alone) or drift (over the
    window, `links` runs since `since`), on its device time or (`metric` host) its host
    time over processes."""

    dtype: str
    shape: str
    metric: str
    kind: str
    change: Change
    since: str
    links: int = 1


@dataclass(frozen=True)
class IssueRow:
    """A row in the issue: what was found, at which commit and job, and where it recovered
    (`recovered_at` with the change since it started, else None)."""

    found: RowFound
    found_at: str
    job_url: str
    recovered_at: str | None = None
    recovered: Change | None = None


def row_name(row: RowFound) -> str:
    """`float16 4096×4096`, `host time of float32 64`."""
    name = f"{escape_text(row.dtype, 40)} {escape_text(row.shape, 120)}"
    return f"host time of {name}" if row.metric == "host" else name


def _change(change: Change) -> str:
    return f"{percent(change)} {band_text(change)}"


def _context(row: RowFound) -> str:
    if row.kind == DRIFT:
        return (
            f"over its last {row.links} runs, since {short_sha(row.since)}; none of them "
            "beyond the threshold alone"
        )
    return f"against {short_sha(row.since)}, the last default-branch commit that ran it"


def render_merge_comment(
    op: str,
    backend: str,
    sha: str,
    rows: Sequence[RowFound],
    threshold: float,
    job_url: str,
) -> str:
    """The comment on the pull request whose merge made `rows` slower (or, for a drift, was
    the last of the runs that did): one sentence a row."""
    lines = []
    for row in rows:
        what = "this merge made" if row.kind == SLOWER else "the default branch drifted:"
        lines.append(
            f"- 📉 {what} {code_span(op, 80)} {row_name(row)} {_change(row.change)} slower on "
            f"{code_span(backend, 80)} ({_context(row)})"
        )
    return "\n".join(
        [
            f"**The default branch's run of {short_sha(sha)} ({link('job', job_url)}) found "
            f"rows slower beyond noise** (threshold {format_threshold(threshold)}):",
            "",
            *lines,
            "",
            "Each row was compared with the last default-branch commit that ran it, in "
            "alternating rounds; a row is slower only when its whole 95 % interval lies "
            "beyond the threshold.",
        ]
    )


def render_issue_title(op: str, backend: str) -> str:
    """Plain text, as GitHub shows titles: names go in as they are (checked names)."""
    return f"Performance regression on the default branch: {op} on {backend}"


def render_issue_body(
    op: str, backend: str, rows: Sequence[IssueRow], threshold: float, closed: bool
) -> str:
    """The issue: what got slower (one table row a finding), and whether it recovered."""
    state = "Every row below recovered." if closed else "Open while a row below is slower."
    table = [
        "| row | found | at | since | now |",
        "|---|---|---|---|---|",
    ]
    for item in rows:
        row = item.found
        kind = "drift" if row.kind == DRIFT else "one commit"
        now = "slower"
        if item.recovered_at is not None and item.recovered is not None:
            now = f"recovered at {short_sha(item.recovered_at)} ({_change(item.recovered)})"
        table.append(
            f"| {row_name(row)} | {_change(row.change)} ({kind}, {row.links} "
            f"run{'' if row.links == 1 else 's'}) | {link(short_sha(item.found_at), item.job_url)} "
            f"| {short_sha(row.since)} | {now} |"
        )
    return "\n".join(
        [
            issue_marker(op, backend),
            f"The default branch's runs of {code_span(op, 80)} on {code_span(backend, 80)} found "
            f"rows slower beyond noise (threshold {format_threshold(threshold)}). {state}",
            "",
            *table,
            "",
            "A row is slower when its whole 95 % interval lies beyond the threshold: against the "
            "last default-branch commit that ran it (one commit), or over the last runs chained "
            "(a drift). It recovers when the change since it started is back within the "
            "threshold. This issue is updated in place and closed when every row has recovered.",
        ]
    )


def render_close_comment(op: str, backend: str, sha: str, rows: Sequence[IssueRow]) -> str:
    """The comment that closes the issue: which commit's run found the rows recovered."""
    named = ", ".join(row_name(item.found) for item in rows[:10])
    more = f" and {len(rows) - 10} more" if len(rows) > 10 else ""
    return (
        f"✅ The default branch's run of {short_sha(sha)} found {code_span(op, 80)} on "
        f"{code_span(backend, 80)} recovered ({named}{more}): closing."
    )
