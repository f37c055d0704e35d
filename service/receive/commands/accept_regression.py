"""`/test accept-regression [SPEC...]`: a maintainer accepts the significant regression that
failed the gate of this pull request's latest jobs (those matching; all without selectors):
their comments and checks then say so, and the checks no longer fail."""

from __future__ import annotations

from dataclasses import dataclass

from report.gate import gate_failed
from service.receive.commands.registry import Answer, CommandSpec
from service.receive.commands.words import BackendTable, Selector, format_specs, selectors
from service.receive.context import CommandContext
from service.render.replies import render_accept_summary

ACCEPT = "accept-regression"


@dataclass(frozen=True)
class AcceptCommand:
    """`/test accept-regression [SPEC...]`: a maintainer accepts the significant regression
    that failed the gate of this PR's latest jobs (those matching; all without selectors)."""

    selectors: tuple[Selector, ...] = ()


def parse(words: list[str], table: BackendTable) -> AcceptCommand:
    return AcceptCommand(selectors(words, table, ACCEPT, "accepts every failed gate of this PR"))


def format_accept(cmd: AcceptCommand) -> str:
    return " ".join(["/test", ACCEPT, *format_specs([(s.op, s.backend) for s in cmd.selectors])])


def handle(ctx: CommandContext, cmd: AcceptCommand) -> Answer:
    services, ev = ctx.services, ctx.event
    failed = [
        job
        for job in services.jobs.latest_per_target(ev.repo, ev.pr_number)
        if (not cmd.selectors or any(s.selects(job.op, job.backend) for s in cmd.selectors))
        and gate_failed(services.view(job))
    ]
    accepted = services.jobs.accept_regression([job.id for job in failed], ev.login)
    views = [services.view(job) for job in accepted]
    scope = [str(s) for s in cmd.selectors]
    text = render_accept_summary(views, scope, format_accept(cmd), ev.login)
    return text, f"accepted {len(accepted)} job(s)"


SPEC = CommandSpec(
    name=ACCEPT,
    kind=AcceptCommand,
    parse=parse,
    format=format_accept,
    usage=f"`/test {ACCEPT} [OP[:BACKEND]...]`",
    help=(
        (
            f"`/test {ACCEPT} [OP[:BACKEND]]`",
            "a maintainer accepts the regression that failed the gate of this pull request's "
            "latest jobs (the check turns neutral)",
        ),
    ),
    handle=handle,
    subcommands=(ACCEPT,),
)
