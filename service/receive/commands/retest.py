"""`/retest`: run again, on the approved head, this pull request's jobs whose last run failed,
errored or timed out."""

from __future__ import annotations

from dataclasses import dataclass

from service.db.models import Job
from service.receive.commands.registry import Answer, CommandSpec, Needs
from service.receive.commands.words import BackendTable, Invalid, Target
from service.receive.context import CommandContext
from service.receive.enqueue import Run, queue_target
from service.render.replies import render_retest_summary
from workflows.models import JobStatus

RETEST_STATUSES = frozenset({JobStatus.failed, JobStatus.errored, JobStatus.timed_out})


@dataclass(frozen=True)
class RetestCommand:
    """`/retest`: run again the PR's jobs whose last run failed or errored."""


def parse(words: list[str], _table: BackendTable) -> RetestCommand:
    if words:
        raise Invalid(
            "`/retest` takes no arguments: it runs again this PR's jobs whose last run "
            "failed or errored. To run particular operators, use `/test OP:BACKEND`.",
            [f"/test {' '.join(words)}"],
        )
    return RetestCommand()


def handle(ctx: CommandContext, _cmd: RetestCommand) -> Answer:
    pull, sha, settings = ctx.loaded()
    services, ev = ctx.services, ctx.event
    again: list[Job] = []
    for last in services.jobs.latest_per_target(ev.repo, ev.pr_number):
        if last.status not in RETEST_STATUSES:
            continue
        target = Target(last.op, last.backend)
        run = Run.as_ran(last)
        job, _ = queue_target(services, ev.origin, pull, sha, target, run, settings)
        again.append(job)
    views = [services.view(job) for job in again]
    return render_retest_summary(views), f"retest: {len(again)} job(s)"


SPEC = CommandSpec(
    name="retest",
    kind=RetestCommand,
    parse=parse,
    format=lambda _cmd: "/retest",
    usage="`/retest`",
    help=(("`/retest`", "run again the jobs whose last run failed or errored"),),
    handle=handle,
    needs=Needs(pull=True),
    word="retest",
    claims=lambda _words: True,
)
