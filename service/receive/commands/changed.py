"""`/test changed[:BACKENDS] [--all] [--no-bench] [--no-compare]`, or `/test` alone: the
operators the pull request changes, each on each backend; past the repository's limit only
with `--all`."""

from __future__ import annotations

from dataclasses import dataclass

from service.receive.commands.registry import Answer, CommandSpec, Needs
from service.receive.commands.words import (
    CHANGED,
    BackendTable,
    Invalid,
    backend,
    clip,
    flags_of,
    is_flag,
    items,
    without_refs,
)
from service.receive.context import CommandContext
from service.receive.enqueue import ChangedRequest, Run, run_changed


@dataclass(frozen=True)
class ChangedCommand:
    """`/test changed[:BACKENDS]`, or `/test` alone: the operators the pull request changes,
    each on each backend; past the repository's limit only with `--all`."""

    backends: tuple[str, ...]
    everything: bool = False  # `--all`
    bench: bool = True
    compare: bool = True


def _names_changed(word: str) -> bool:
    return CHANGED in word.lower().partition(":")[0].split(",")


def claims(words: list[str]) -> bool:
    """`/test` with no operator, or any word naming `changed` (not a `vs` commit's name)."""
    specs = [w for w in without_refs(words) if not is_flag(w)]
    return not specs or any(_names_changed(w) for w in specs)


def parse(words: list[str], table: BackendTable) -> ChangedCommand:
    specs = [w for w in words if not is_flag(w)]
    backends: list[str] = list(table.defaults)
    if specs:
        ops, colon, backends_text = specs[0].partition(":")
        if ops.lower() != CHANGED or len(specs) > 1:
            rest = [w for w in specs if not _names_changed(w)]
            raise Invalid(
                f"`{CHANGED}` stands alone: `/test {CHANGED}[:BACKEND,...]` runs the operators "
                "this pull request changes; to name operators too, post them as another "
                "command (`/test OP[:BACKEND]`).",
                [f"/test {' '.join(rest)}"] if rest else [],
            )
        if colon and not backends_text:
            raise Invalid(
                f"`{clip(specs[0])}` names no backend after `:`. Write "
                f"`/test {CHANGED}:BACKEND`, or `/test {CHANGED}` for the default backends."
            )
        if colon:
            named = items(backends_text, specs[0], "backend")
            backends = list(dict.fromkeys(backend(b, table) for b in named))
    if not backends:
        raise Invalid(
            "no default backend is configured: name the backends, e.g. "
            f"`/test {CHANGED}:BACKEND`; known backends: {table.describe()}."
        )
    flags = flags_of(words)
    if "--new-op" in flags:
        raise Invalid(
            f"`--new-op` names an operator the service does not know; `/test {CHANGED}` finds "
            "the operators in the pull request itself, new ones included."
        )
    return ChangedCommand(
        backends=tuple(backends),
        everything="--all" in flags,
        bench="--no-bench" not in flags,
        compare="--no-compare" not in flags,
    )


def format_changed(cmd: ChangedCommand) -> str:
    words = ["/test", f"{CHANGED}:{','.join(cmd.backends)}"]
    if cmd.everything:
        words.append("--all")
    if not cmd.bench:
        words.append("--no-bench")
    if not cmd.compare:
        words.append("--no-compare")
    return " ".join(words)


def handle(ctx: CommandContext, cmd: ChangedCommand) -> Answer:
    pull, sha, settings = ctx.loaded()
    request = ChangedRequest(cmd.backends, cmd.everything, Run(cmd.bench, cmd.compare))
    who = f"`{format_changed(cmd)}`"
    return run_changed(ctx.services, ctx.event.origin, request, pull, sha, settings, who)


SPEC = CommandSpec(
    name=CHANGED,
    kind=ChangedCommand,
    parse=parse,
    format=format_changed,
    usage=f"`/test [{CHANGED}[:BACKEND,...]] [--all]` (the operators this PR changes)",
    help=(
        (
            f"`/test {CHANGED}[:BACKEND,...]` or `/test`",
            "the operators this pull request changes, with why (above the repository's limit, "
            "only with `--all`)",
        ),
    ),
    handle=handle,
    needs=Needs(pull=True),
    claims=claims,
)
