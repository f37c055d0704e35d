"""`/test profile OP:BACKEND [OP:BACKEND ...] [vs REF]`: run the named operators as `/test`
does (the benchmark compared with the merge base, or with `REF`), then time the rows that
changed most under the workflow's profiler on both sides; the comment's Profile section says
which kernels moved, and the job's page offers the traces. The verdict is the comparison's
alone. Answered as `/test` is: the same trust, the same replies."""

from __future__ import annotations

import re
from dataclasses import dataclass

from service.receive.commands.registry import Answer, CommandSpec, Needs
from service.receive.commands.words import (
    MAX_TARGETS,
    VS,
    BackendTable,
    Invalid,
    Target,
    backend,
    clip,
    fan_out,
    format_specs,
    is_flag,
    split_spec,
)
from service.receive.context import CommandContext
from service.receive.enqueue import Run, against_ref, queue_targets

PROFILE = "profile"
MAX_PROFILED = 4  # jobs one profile command may start: each profiles three rows twice
# A branch, a tag or a SHA as git allows them, conservatively: no option, no range, no `..`.
REF_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/+-]{0,99}")


@dataclass(frozen=True)
class ProfileCommand:
    """`/test profile OP:BACKEND...`: the targets to run and profile, in the order written."""

    targets: tuple[Target, ...]
    against: str | None = None  # `vs REF`: compare with that commit, not the merge base


def _ref(words: list[str]) -> str:
    """REF of `vs REF` (the words after `vs`)."""
    bad = len(words) != 1 or is_flag(words[0])
    word = words[0] if words else ""
    unsafe = ".." in word or word.endswith((".", "/", ".lock")) or "//" in word
    if bad or unsafe or not REF_PATTERN.fullmatch(word):
        raise Invalid(
            f"`{VS}` takes one branch, tag or commit: `/test {PROFILE} OP:BACKEND {VS} REF`, "
            "with REF such as `v1.0`, `main` or a commit's SHA."
        )
    return word


def parse(words: list[str], table: BackendTable) -> ProfileCommand:
    lowered = [w.lower() for w in words]
    against = None
    if VS in lowered:
        at = lowered.index(VS)
        words, against = words[:at], _ref(words[at + 1 :])
    flags = [w for w in words if is_flag(w)]
    if flags:
        raise Invalid(
            f"`/test {PROFILE}` takes no flags (`{clip(flags[0])}`): it benchmarks, compares "
            f"and profiles. Write `/test {PROFILE} OP:BACKEND`."
        )
    if not words:
        raise Invalid(f"`/test {PROFILE}` names what to profile: `/test {PROFILE} OP:BACKEND`.")
    targets: list[Target] = []
    for word in words:
        ops, backend_words = split_spec(word)
        if not backend_words:
            raise Invalid(
                f"`{clip(word)}` names no backend: a profile runs on one device, e.g. "
                f"`/test {PROFILE} {ops[0]}:BACKEND`; known backends: {table.describe()}.",
                [f"/test {PROFILE} {ops[0]}:{b}" for b in table.defaults],
            )
        fan_out(
            targets,
            [Target(op, backend(b, table)) for op in ops for b in backend_words],
            f"too many profiles: at most {MAX_PROFILED} (operator, backend) pairs per command.",
        )
    if len(targets) > min(MAX_PROFILED, MAX_TARGETS):
        raise Invalid(
            f"too many profiles: at most {MAX_PROFILED} (operator, backend) pairs per command."
        )
    return ProfileCommand(tuple(targets), against)


def format_profile(cmd: ProfileCommand) -> str:
    words = ["/test", PROFILE, *format_specs([(t.op, t.backend) for t in cmd.targets])]
    if cmd.against is not None:
        words += [VS, cmd.against]
    return " ".join(words)


def handle(ctx: CommandContext, cmd: ProfileCommand) -> Answer:
    pull, sha, settings = ctx.loaded()
    services, ev = ctx.services, ctx.event
    run: Run | str = Run(profile=True)
    if cmd.against is not None:
        run = against_ref(services, ev.repo, run, cmd.against)
        if isinstance(run, str):
            return run, "unknown ref: nothing queued"
    answers, created = queue_targets(services, ev.origin, pull, sha, cmd.targets, run, settings)
    return "\n\n".join(answers), f"{created} profile job(s) queued, {len(answers)} not queued"


SPEC = CommandSpec(
    name=PROFILE,
    kind=ProfileCommand,
    parse=parse,
    format=format_profile,
    usage=f"`/test {PROFILE} OP:BACKEND [{VS} REF]`",
    help=(
        (
            f"`/test {PROFILE} OP:BACKEND`",
            "benchmark and compare as `/test` does, then profile the rows that changed most "
            "on both sides: each kernel's time before → after (not part of the verdict) and "
            "the traces on the job's page",
        ),
    ),
    handle=handle,
    needs=Needs(pull=True),
    subcommands=(PROFILE,),
)
