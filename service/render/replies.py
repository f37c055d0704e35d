"""Short replies to commands: help, a command error, a duplicate, cancel and retest summaries,
the refusal for a commenter who may not start jobs, and a command waiting for a permission."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from report.comment import COMMENT_BUDGET
from report.markdown import clip, code_span, escape_text, link, plural, short_sha
from report.summary import summary
from report.views import JobView
from workflows.models import JobStatus

HELP_TITLE = "**On-demand kernel tests**"
REPLY_SEPARATOR = "\n\n---\n\n"


def join_replies(parts: Sequence[str], budget: int = COMMENT_BUDGET) -> str:
    """The answers to one comment's commands as one reply within GitHub's comment limit: as
    many whole answers as fit, then one line saying how many were left out."""
    kept: list[str] = []
    size = 0
    for part in parts:
        extra = len(part) + (len(REPLY_SEPARATOR) if kept else 0)
        if size + extra > budget - 200:  # room for the closing line
            break
        kept.append(part)
        size += extra
    text = REPLY_SEPARATOR.join(kept)
    left = len(parts) - len(kept)
    if left:
        more = plural(left, "more answer")
        text += f"{REPLY_SEPARATOR}… {more} left out to fit GitHub's comment limit.\n"
    return text


MAX_LISTED_OPERATORS = 150


@dataclass(frozen=True)
class BackendInfo:
    """A backend as `/test help` shows it; `unhealthy` holds "runner: reason" lines."""

    name: str
    aliases: tuple[str, ...]
    description: str
    runners_online: int
    unhealthy: tuple[str, ...] = ()


def render_help(
    rows: Sequence[tuple[str, str]],
    backends: Sequence[BackendInfo],
    default_backends: Sequence[str],
    operators: Sequence[str] = (),
) -> str:
    """Usage (each command's rows, from the command registry; `{defaults}` in a row names
    the default backends), the backends with their aliases and runners online, the operators
    recently tested commits know, and the rules."""
    defaults = ", ".join(f"`{b}`" for b in default_backends) or "none configured"
    lines = [
        f"{HELP_TITLE}: run an operator's accuracy tests and benchmark on real hardware, on "
        "this pull request's head commit.",
        "",
        "| command | does |",
        "|---|---|",
        *(f"| {command} | {does.format(defaults=defaults)} |" for command, does in rows),
        "",
        _backend_table(backends),
        "",
        *_operator_list(operators),
        "A command starts a line; `|`, spaces and `OP : BACKEND` are all fine as separators. "
        "Commands in code blocks and quotes are ignored. Only people with write permission on "
        "the repository (or on the service's allow-list) start jobs. A job tests the commit "
        "that was the head when the command was posted; a later push needs a new `/test`.",
    ]
    return "\n".join(lines) + "\n"


def _operator_list(operators: Sequence[str]) -> list[str]:
    if not operators:
        return []
    shown = ", ".join(code_span(op, 80) for op in operators[:MAX_LISTED_OPERATORS])
    more = len(operators) - MAX_LISTED_OPERATORS
    tail = f", … {more} more" if more > 0 else ""
    return [f"Operators the recently tested commits know ({len(operators)}): {shown}{tail}.", ""]


def _backend_table(backends: Sequence[BackendInfo]) -> str:
    if not backends:
        return "No backends are configured."
    rows = ["| backend | aliases | runners online | about |", "|---|---|---|---|"]
    for info in backends:
        aliases = ", ".join(code_span(a, 40, table=True) for a in info.aliases) or "–"
        online = str(info.runners_online)
        if info.unhealthy:
            sick = "; ".join(escape_text(u, 120) for u in info.unhealthy[:5])
            more = len(info.unhealthy) - 5
            online += f" (unhealthy: {sick}{f'; … {more} more' if more > 0 else ''})"
        about = escape_text(info.description, 200) if info.description else ""
        rows.append(f"| {code_span(info.name, 40, table=True)} | {aliases} | {online} | {about} |")
    return "\n".join(rows)


def render_command_error(
    line: str,
    message: str,
    suggestions: Sequence[str],
    usage: str,
    backends: Sequence[BackendInfo],
) -> str:
    """What was wrong with a command line, what is accepted (`usage`), and the close
    matches."""
    lines = [
        f"⚠️ I could not run this command: {code_span(line, 200)}",
        "",
        message[:1].upper() + message[1:],
    ]
    if len(suggestions) > 1:
        lines += ["", "Close matches: " + ", ".join(code_span(s, 80) for s in suggestions)]
    names = ", ".join(
        code_span(b.name, 40) + (f" ({plural(b.runners_online, 'runner')} online)")
        for b in backends
    )
    lines += ["", f"Accepted: {usage}."]
    if names:
        lines.append(f"Backends: {names}.")
    lines.append("`/test help` shows the full usage.")
    return "\n".join(lines) + "\n"


def render_duplicate(op: str, backend: str, existing: JobView) -> str:
    """The reply when the same (PR, SHA, op, backend) job is already queued or running."""
    state = "running" if existing.status is JobStatus.running else "queued"
    where = f"`{op}` on `{backend}` is already {state}"
    detail = summary(existing)
    return (
        f"⏭️ {where} for commit `{escape_text(short_sha(existing.sha), 40)}`: "
        f"{link(f'job #{existing.id}', existing.job_url)} ({escape_text(detail, 200)}). "
        "It was not queued again.\n"
    )


def render_cancel_summary(
    cancelled: Sequence[JobView], selectors: Sequence[str], command: str
) -> str:
    """Which jobs `/test cancel` (canonical text `command`, `OP[:BACKEND]` `selectors`)
    stopped, or that nothing matched."""
    scope = _scope(selectors)
    if not cancelled:
        return f"Nothing to cancel: no queued or running job of this pull request{scope}.\n"
    lines = [f"⛔ Cancelled {plural(len(cancelled), 'job')}{scope} (`{command}`):"]
    lines += [_job_line(v) for v in cancelled[:50]]
    if len(cancelled) > 50:
        lines.append(f"- … {len(cancelled) - 50} more")
    return "\n".join(lines) + "\n"


def render_accept_summary(
    accepted: Sequence[JobView], selectors: Sequence[str], command: str, login: str
) -> str:
    """Which failed gates `/test accept-regression` (canonical text `command`) accepted, or
    that none matched."""
    scope = _scope(selectors)
    if not accepted:
        return (
            f"Nothing to accept: no latest job of this pull request{scope} failed its "
            "regression gate.\n"
        )
    who = escape_text(login, 40)
    lines = [
        f"✅ @{who} accepted the regression of {plural(len(accepted), 'job')}{scope} "
        f"(`{command}`): their checks no longer fail.",
    ]
    lines += [_job_line(v) for v in accepted[:50]]
    return "\n".join(lines) + "\n"


def render_retest_summary(jobs: Sequence[JobView]) -> str:
    """The jobs `/retest` queued again, or that nothing failed."""
    if not jobs:
        return "Nothing failed: nothing to retest.\n"
    lines = [f"🔁 Running again {plural(len(jobs), 'job')} whose last run failed or errored:"]
    lines += [_job_line(v) for v in jobs[:50]]
    if len(jobs) > 50:
        lines.append(f"- … {len(jobs) - 50} more")
    return "\n".join(lines) + "\n"


def render_unknown_operator(op: str, backend: str, close: Sequence[str], sha: str | None) -> str:
    """An operator the service knows is not there: answered at once, nothing queued. `sha`
    when the commit itself was tested (certain), None when other commits' operators say it is
    a near miss (probable)."""
    matches = ", ".join(code_span(c, 80) for c in close)
    if sha is not None:
        text = f"⚠️ Commit `{escape_text(short_sha(sha), 40)}` has no operator {code_span(op, 80)}"
        text += f": its tests know no such marker, so nothing was queued on `{backend}`."
        if matches:
            text += f" Close matches: {matches}."
        return text + "\n"
    return (
        f"⚠️ {code_span(op, 80)} is not an operator this repository's tests know; did you mean "
        f"{matches}? Nothing was queued on `{backend}`. If the pull request adds "
        f"{code_span(op, 80)}, run `/test {op}:{backend} --new-op`.\n"
    )


def render_unknown_ref(ref: str) -> str:
    """`/test ... vs REF` where GitHub knows no such commit: nothing was queued."""
    return (
        f"⚠️ {code_span(ref, 100)} names no branch, tag or commit of this repository, so "
        "nothing was queued. Name a tag (a release), a branch or a commit's SHA.\n"
    )


def render_not_approved(command: str, head: str, why: str) -> str:
    """A test or retest that runs nothing because the pull request changed after it was
    written: an approval is for the code that was there, not for what came after."""
    return (
        f"⚠️ Nothing was run for {code_span(command, 200)}: this pull request "
        f"changed after the command was written ({escape_text(why, 200)}). Its head is now "
        f"`{escape_text(short_sha(head), 40)}`; to test that commit, post the command again.\n"
    )


def render_not_allowed(login: str, reason: str) -> str:
    """Why a commenter's command started nothing, addressed to them."""
    who = clip("".join(c for c in login if c.isalnum() or c in "-_[]"), 60) or "there"
    return (
        f"@{who}: only people with write permission on this repository (or on the service's "
        f"allow-list) can start on-demand jobs, so nothing was run ({escape_text(reason, 200)}). "
        "A maintainer can post the command instead.\n"
    )


def render_missing_permission(cannot: str, label: str, *, app: bool) -> str:
    """Why a command waits: GitHub refused the service a permission (`label`, e.g. `Contents:
    read`; `cannot`, what it stops: "read this repository's contents"). The command is kept
    and runs by itself once the permission is granted."""
    if app:
        who = "This App"
        fix = (
            "An owner of this repository's organization or account must accept the App's new "
            "permissions (the App's installation settings show the request), or grant it there"
        )
    else:
        who = "The service's token"
        fix = "Whoever runs the service must give its token that permission"
    return (
        f"⏸️ {who} cannot {escape_text(cannot, 200)} (**{escape_text(label, 100)}**), so "
        f"this command waits. {fix}; the command then runs by itself, with no need to post "
        "it again.\n"
    )


def _scope(selectors: Sequence[str]) -> str:
    return " matching " + ", ".join(f"`{s}`" for s in selectors) if selectors else ""


def _job_line(view: JobView) -> str:
    return (
        f"- `{view.op}` on `{view.backend}` · commit `{escape_text(short_sha(view.sha), 40)}` · "
        f"{link(f'job #{view.id}', view.job_url)}"
    )
