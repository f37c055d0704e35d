"""The commands a pull-request comment can hold, each one module (its grammar, handler, help
and needs) registered here, in the order usage lists them. A new command is one new module
and one line in `REGISTRY`.

    /test [|] SPEC [SPEC ...] [--no-bench] [--no-compare] [--new-op]
    SPEC := OPS [":" BACKENDS]     OPS := OP ("," OP)*     BACKENDS := BACKEND ("," BACKEND)*
    /test [changed[:BACKENDS]] [--all] [--no-bench] [--no-compare]
    /test help | /test ?           /test cancel [SPEC ...]           /retest
    /test accept-regression [SPEC ...]
    /test profile OP:BACKEND [OP:BACKEND ...] [vs REF]

Which lines are commands: `scan.py`; the words they share: `words.py`; the dispatch:
`registry.py`. A lone bare word close to a subcommand (`/test hlep`) is answered with "did you
mean `help`"; name a backend (`hlep:cpu`) to test an operator spelled like that.
"""

from __future__ import annotations

from service.receive.commands import (
    accept_regression,
    cancel,
    changed,
    help,
    profile,
    retest,
    test,
)
from service.receive.commands.registry import MAX_COMMANDS, Command, CommandSpec, Needs, Registry
from service.receive.commands.scan import command_lines, may_hold_commands
from service.receive.commands.words import MAX_TARGETS, CommandError, Selector, Target

# One entry a command, in the order usage lists them (with its module in the import above).
REGISTRY = Registry(
    [
        test.SPEC,
        changed.SPEC,
        help.SPEC,
        cancel.SPEC,
        accept_regression.SPEC,
        profile.SPEC,
        retest.SPEC,
    ]
)

parse_comment = REGISTRY.parse_comment
format_command = REGISTRY.format
USAGE = REGISTRY.usage

__all__ = [
    "MAX_COMMANDS",
    "MAX_TARGETS",
    "REGISTRY",
    "USAGE",
    "Command",
    "CommandError",
    "CommandSpec",
    "Needs",
    "Registry",
    "Selector",
    "Target",
    "command_lines",
    "format_command",
    "may_hold_commands",
    "parse_comment",
]
