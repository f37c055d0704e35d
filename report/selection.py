"""The reply to `/test changed` (and to a trusted author's push): which operators the pull
request changes and why (file → operator), the jobs queued for them, or why none were: no
operator changed, more than the repository's limit, more files than GitHub lists."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from report.markdown import code_span, details, escape_text, plural, short_sha
from report.views import JobView

MAX_ROWS = 60  # operators shown with their reasons; the rest are named only
MAX_REASONS = 3  # reasons shown per operator
MAX_NAMED = 400  # operators named past the table
MAX_FILES_SHOWN = 50  # files listed as touching no operator


@dataclass(frozen=True)
class SelectionReply:
    """What one selection chose and did, as plain data for the renderer.

    `who` names the trigger ("`/test changed`", "the push by @alice"); `operators` maps each
    selected operator to its reasons (`path: why`); `queued` the jobs made for them and
    `existing` those already queued or running (not queued again)."""

    who: str
    sha: str
    backends: tuple[str, ...]
    operators: Mapping[str, Sequence[str]] = field(default_factory=dict)
    unmatched: Sequence[str] = ()
    files: int = 0
    limit: int = 20
    over_limit: bool = False
    queued: Sequence[JobView] = ()
    existing: Sequence[JobView] = ()


def render_selection(reply: SelectionReply) -> str:
    """The selection reply: the chosen operators with why, then what was queued."""
    ops = list(reply.operators)
    at = f"`{escape_text(short_sha(reply.sha), 40)}`"
    on = ", ".join(f"`{b}`" for b in reply.backends)
    if not ops:
        lines = [
            f"🔎 {reply.who} at {at}: none of the {plural(reply.files, 'changed file')} "
            "touches an operator, so nothing was queued. To test one anyway: "
            "`/test OP:BACKEND`.",
        ]
        return "\n".join([*lines, *_unmatched(reply.unmatched)]) + "\n"
    head = f"🔎 {reply.who} at {at}: {plural(len(ops), 'operator')} changed"
    head += f" ({plural(reply.files, 'file')} read)"
    if reply.over_limit:
        every = f"/test changed:{','.join(reply.backends)} --all"
        some = f"/test {','.join(ops[:3])}:{','.join(reply.backends)}"
        lines = [
            f"{head}, more than this repository's limit of {reply.limit}: nothing was "
            f"queued. To run them all on {on}, comment `{every}`; or name the ones to run, "
            f"e.g. `{some}`.",
        ]
    else:
        queued = plural(len(reply.queued), "job")
        lines = [f"{head}; {queued} queued on {on}."]
        if reply.existing:
            count = len(reply.existing)
            lines.append(
                f"{plural(count, 'job')} of this commit {'was' if count == 1 else 'were'} "
                "already queued or running, and not queued again."
            )
    lines += ["", *_table(reply.operators)]
    return "\n".join([*lines, *_unmatched(reply.unmatched)]) + "\n"


def render_capped(who: str, total: int, cap: int, backends: Sequence[str]) -> str:
    """The answer for a pull request with more files than GitHub lists (`cap`)."""
    return (
        f"🔎 {who}: this pull request changes {total:,} files, and GitHub lists at most "
        f"{cap:,} of a pull request's files, so the selection cannot see them all and "
        "nothing was queued. Name the operators to test: "
        f"`/test OP[,OP...]:{','.join(backends) or 'BACKEND'}`.\n"
    )


def render_selection_failed(who: str, why: str) -> str:
    """The answer when the pull request's tree could not be read."""
    return (
        f"⚠️ {who}: the pull request's files could not be read ({escape_text(why, 300)}), so "
        "nothing was queued. Try again, or name the operators: `/test OP:BACKEND`.\n"
    )


def _table(operators: Mapping[str, Sequence[str]]) -> list[str]:
    rows = ["| operator | why |", "|---|---|"]
    items = list(operators.items())
    for op, reasons in items[:MAX_ROWS]:
        shown = [_reason(r) for r in reasons[:MAX_REASONS]]
        if len(reasons) > MAX_REASONS:
            shown.append(f"and {len(reasons) - MAX_REASONS} more")
        rows.append(f"| {code_span(op, 80, table=True)} | {'<br>'.join(shown)} |")
    rest = [op for op, _ in items[MAX_ROWS:]]
    if rest:
        named = ", ".join(code_span(op, 80) for op in rest[:MAX_NAMED])
        more = f" and {len(rest) - MAX_NAMED} more" if len(rest) > MAX_NAMED else ""
        rows += ["", details(f"{len(rest)} more operators", named + more)]
    return rows


def _reason(reason: str) -> str:
    """`path: why` with the paths in it (untrusted: a pull request's file names) as code."""
    path, _, why = reason.partition(": ")
    for lead in ("imported by ", "the repository's rule "):
        if why.startswith(lead):
            named = why.removeprefix(lead).strip("`")
            return f"{code_span(path, 200, table=True)}: {lead}{code_span(named, 200, table=True)}"
    return f"{code_span(path, 200, table=True)}: {escape_text(why, 200).replace('|', '&#124;')}"


def _unmatched(paths: Sequence[str]) -> list[str]:
    if not paths:
        return []
    shown = ", ".join(code_span(p, 200) for p in paths[:MAX_FILES_SHOWN])
    more = f" and {len(paths) - MAX_FILES_SHOWN} more" if len(paths) > MAX_FILES_SHOWN else ""
    title = f"{plural(len(paths), 'changed file')} touch no operator"
    if len(paths) == 1:
        title = "1 changed file touches no operator"
    return ["", details(title, shown + more)]
