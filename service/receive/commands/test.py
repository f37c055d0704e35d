"""`/test SPEC... [vs REF] [--no-bench] [--no-compare] [--new-op]`: run the named operators on
the named backends (the default backends where a SPEC names none), one job per (operator,
backend); compared with the pull request's merge base, or with `REF` itself (a tag such as a
release, a branch, or a commit)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from service.receive.commands.registry import Answer, CommandSpec, Needs
from service.receive.commands.words import (
    CHANGED,
    MAX_TARGETS,
    VS,
    BackendTable,
    Invalid,
    Target,
    backend,
    clip,
    fan_out,
    flag,
    format_specs,
    is_flag,
    split_spec,
)
from service.receive.context import CommandContext
from service.receive.enqueue import Run, against_ref, queue_targets

# A branch, a tag or a SHA as git allows them, conservatively: no option, no range, no `..`.
REF_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/+-]{0,99}")


@dataclass(frozen=True)
class TestCommand:
    """`/test SPEC...`: the targets to run, deduplicated, in the order written."""

    __test__ = False  # not a pytest class

    targets: tuple[Target, ...]
    bench: bool = True
    compare: bool = True
    new_op: bool = False  # an operator the service does not know yet: run it anyway
    against: str | None = None  # `vs REF`: compare with that commit, not the merge base


def _ref(word: str) -> str:
    bad = ".." in word or word.endswith((".", "/", ".lock")) or "//" in word
    if REF_PATTERN.fullmatch(word) and not bad:
        return word
    raise Invalid(
        f"`{clip(word)}` is not a branch, tag or commit to compare with: `/test OP:BACKEND "
        f"{VS} REF` takes one name such as `v1.0`, `main` or a commit's SHA."
    )


def _against(words: list[str]) -> tuple[list[str], str | None]:
    """The words less `vs REF`, and REF (None without `vs`)."""
    lowered = [w.lower() for w in words]
    if VS not in lowered:
        return words, None
    i = lowered.index(VS)
    if i + 1 >= len(words) or is_flag(words[i + 1]):
        raise Invalid(
            f"`{VS}` names no commit: write `/test OP:BACKEND {VS} REF`, with REF a tag "
            "(a release), a branch or a commit's SHA."
        )
    rest = words[:i] + words[i + 2 :]
    if VS in (w.lower() for w in rest):
        raise Invalid(f"`{VS}` stands once in a command: one commit to compare with.")
    return rest, _ref(words[i + 1])


def parse(words: list[str], table: BackendTable) -> TestCommand:
    bench = compare = True
    new_op = False
    targets: list[Target] = []
    words, against = _against(words)
    for word in words:
        if is_flag(word):
            name = flag(word)
            bench = bench and name != "--no-bench"
            compare = compare and name != "--no-compare"
            new_op = new_op or name == "--new-op"
            if name == "--all":
                raise Invalid(
                    f"`--all` goes with `/test {CHANGED}` (past the limit of operators it "
                    "selects); `/test OP...` runs what it names."
                )
            continue
        ops, backend_words = split_spec(word)
        if not backend_words:
            if not table.defaults:
                raise Invalid(
                    f"`{clip(word)}` names no backend and no default backend is configured. "
                    f"Name one, e.g. `{ops[0]}:BACKEND`; known backends: {table.describe()}."
                )
            _reject_backend_as_op(ops, targets, table)
            backends = list(table.defaults)
        else:
            backends = [backend(b, table) for b in backend_words]
        fan_out(
            targets,
            [Target(op, b) for op in ops for b in backends],
            f"too many jobs: at most {MAX_TARGETS} (operator, backend) pairs "
            "per command. Split it into several comments.",
        )
    if against is not None and not (bench and compare):
        off = "--no-bench" if not bench else "--no-compare"
        raise Invalid(f"`{VS} {clip(against)}` compares benchmarks, and `{off}` says not to.")
    return TestCommand(tuple(targets), bench, compare, new_op, against)


def _reject_backend_as_op(ops: list[str], targets: list[Target], table: BackendTable) -> None:
    """`/test add cpu` almost surely meant `add:cpu`: say so instead of testing an op `cpu`."""
    if all(table.resolve(op) is not None for op in ops):
        previous = targets[-1].op if targets else "OP"
        fix = f"{previous}:{','.join(ops)}"
        raise Invalid(
            f"`{','.join(ops)}` is a backend, not an operator: join them with `:`, e.g. `{fix}`.",
            [fix] if targets else [],
        )


def format_test(cmd: TestCommand) -> str:
    words = ["/test", *format_specs([(t.op, t.backend) for t in cmd.targets])]
    if cmd.against is not None:
        words += [VS, cmd.against]
    if not cmd.bench:
        words.append("--no-bench")
    if not cmd.compare:
        words.append("--no-compare")
    if cmd.new_op:
        words.append("--new-op")
    return " ".join(words)


def handle(ctx: CommandContext, cmd: TestCommand) -> Answer:
    pull, sha, settings = ctx.loaded()
    services, ev = ctx.services, ctx.event
    run: Run | str = Run(cmd.bench, cmd.compare)
    if cmd.against is not None:
        run = against_ref(services, ev.repo, run, cmd.against)
        if isinstance(run, str):
            return run, "unknown ref: nothing queued"
    answers, created = queue_targets(
        services, ev.origin, pull, sha, cmd.targets, run, settings, cmd.new_op
    )
    return "\n\n".join(answers), f"{created} job(s) queued, {len(answers)} not queued"


SPEC = CommandSpec(
    name="test",
    kind=TestCommand,
    parse=parse,
    format=format_test,
    usage="`/test OP[,OP...][:BACKEND[,BACKEND...]] ... [vs REF] [--no-bench] [--no-compare] "
    "[--new-op]`",
    help=(
        ("`/test OP:BACKEND`", "test operator `OP` on `BACKEND`"),
        ("`/test OP`", "test `OP` on the default backends ({defaults})"),
        ("`/test add,mul:nvidia,mthreads`", "every operator on every backend: four jobs"),
        ("`/test OP:BACKEND --no-bench`", "accuracy only, no benchmark"),
        ("`/test OP:BACKEND --no-compare`", "no benchmark of the base branch to compare with"),
        ("`/test OP:BACKEND --new-op`", "an operator this pull request adds (not known yet)"),
        (
            f"`/test OP:BACKEND {VS} REF`",
            "compare with `REF` (a tag such as a release, a branch, a commit) instead of the "
            "merge base",
        ),
    ),
    handle=handle,
    needs=Needs(pull=True),
    fallback=True,
)
