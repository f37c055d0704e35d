"""`/test help` or `/test ?`: usage, the backends with their runners, the operators recently
tested commits know, and the rules. Answers anyone but bots."""

from __future__ import annotations

from dataclasses import dataclass

from service.receive.commands.registry import Answer, CommandSpec, Needs
from service.receive.commands.words import BackendTable
from service.receive.context import CommandContext
from service.render.replies import render_help

HELP_WORDS = ("help", "?", "--help", "-h")


@dataclass(frozen=True)
class HelpCommand:
    """`/test help` or `/test ?`."""


def parse(_words: list[str], _table: BackendTable) -> HelpCommand:
    return HelpCommand()


def handle(ctx: CommandContext, _cmd: HelpCommand) -> Answer:
    services = ctx.services
    rows = ctx.help_rows("help")  # this command's own row last
    known = sorted(services.operators.of_repo(ctx.event.repo))
    text = render_help(rows, services.views.backends(), services.default_backends, known)
    return text, "help"


SPEC = CommandSpec(
    name="help",
    kind=HelpCommand,
    parse=parse,
    format=lambda _cmd: "/test help",
    usage="`/test help`",
    help=(("`/test help` or `/test ?`", "this message"),),
    handle=handle,
    needs=Needs(allowed=False),
    subcommands=HELP_WORDS,
)
