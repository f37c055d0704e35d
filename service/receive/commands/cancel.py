"""`/test cancel [SPEC...]`: cancel this pull request's queued and running jobs, all of them or
the matching ones."""

from __future__ import annotations

from dataclasses import dataclass

from service.db.models import Job
from service.receive.commands.registry import Answer, CommandSpec
from service.receive.commands.words import BackendTable, Selector, format_specs, selectors
from service.receive.context import CommandContext
from service.render.replies import render_cancel_summary

CANCEL = "cancel"


@dataclass(frozen=True)
class CancelCommand:
    """`/test cancel [SPEC...]`; no selectors means all of the PR's queued or running jobs."""

    selectors: tuple[Selector, ...] = ()


def parse(words: list[str], table: BackendTable) -> CancelCommand:
    return CancelCommand(selectors(words, table, CANCEL, "cancels all of this PR's jobs"))


def format_cancel(cmd: CancelCommand) -> str:
    return " ".join(["/test", CANCEL, *format_specs([(s.op, s.backend) for s in cmd.selectors])])


def handle(ctx: CommandContext, cmd: CancelCommand) -> Answer:
    ev = ctx.event

    def match(job: Job) -> bool:
        return not cmd.selectors or any(s.selects(job.op, job.backend) for s in cmd.selectors)

    jobs = ctx.services.jobs.cancel(ev.repo, ev.pr_number, f"cancelled by @{ev.login}", match=match)
    views = [ctx.services.view(job) for job in jobs]
    scope = [str(s) for s in cmd.selectors]
    text = render_cancel_summary(views, scope, format_cancel(cmd))
    return text, f"cancelled {len(jobs)} job(s)"


SPEC = CommandSpec(
    name=CANCEL,
    kind=CancelCommand,
    parse=parse,
    format=format_cancel,
    usage=f"`/test {CANCEL} [OP[:BACKEND]...]`",
    help=(
        (f"`/test {CANCEL}`", "cancel this pull request's queued and running jobs"),
        (f"`/test {CANCEL} OP[:BACKEND]`", "cancel only the matching ones"),
    ),
    handle=handle,
    subcommands=(CANCEL,),
)
