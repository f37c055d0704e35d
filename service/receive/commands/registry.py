"""The command registry: each command is one module that hands the registry a `CommandSpec`
(its grammar, canonical text, usage, help rows, handler and what it needs loaded). The parser
here only dispatches a command line to the spec that claims it; usage, `format_command` and the
help table come from the specs. Pure but for the handlers it holds."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from service.receive.commands.scan import COMMAND_WORD, command_lines
from service.receive.commands.words import (
    BackendTable,
    CommandError,
    Invalid,
    clip,
    close,
    is_flag,
    split_words,
)
from service.receive.context import CommandContext

MAX_COMMANDS = 20  # command lines read from one comment; the rest get one line of answer

# A handler answers (the reply's text, "" for none; what was done, for the log).
Answer = tuple[str, str]
# A parsed command line: the frozen dataclass of the command module that read it (each
# module's own type), or the `CommandError` saying why the line could not be read.
Command = Any


@dataclass(frozen=True)
class Needs:
    """What a command needs before its handler runs."""

    allowed: bool = True  # a commenter allowed to start jobs (write permission or allow-list)
    pull: bool = False  # the pull request open, the head the comment approves, its settings


@dataclass(frozen=True)
class CommandSpec:
    """One command: `/WORD [SUBCOMMAND] ...`.

    `parse` gets the words after the command word, less the subcommand word when one selected
    the spec; it raises `Invalid` for a line it cannot read. A spec is selected by its first
    word (`subcommands`), else by `claims` over all the words, else it is the `fallback` (the
    one spec that reads plain operator specs)."""

    name: str
    kind: type
    parse: Callable[[list[str], BackendTable], Any]
    format: Callable[[Any], str]
    usage: str
    help: tuple[tuple[str, str], ...]
    handle: Callable[[CommandContext, Any], Answer]
    needs: Needs = Needs()
    word: str = "test"
    subcommands: tuple[str, ...] = ()
    claims: Callable[[list[str]], bool] | None = None
    fallback: bool = False


class Registry:
    """The commands the service knows, in the order usage lists them."""

    def __init__(self, specs: Sequence[CommandSpec]) -> None:
        self.specs = tuple(specs)
        self._by_kind = {spec.kind: spec for spec in self.specs}
        fallbacks = [s for s in self.specs if s.fallback]
        assert len(fallbacks) <= 1, "one spec reads plain operator specs"
        self._fallback = fallbacks[0] if fallbacks else None
        # The names a misspelt first word is compared with (`/test hlep`).
        self.subcommand_names = tuple(
            s.name for s in self.specs if s.word == "test" and not s.fallback
        )

    @property
    def usage(self) -> str:
        return ", ".join(spec.usage for spec in self.specs)

    def spec_of(self, command: object) -> CommandSpec | None:
        return self._by_kind.get(type(command))

    def help_rows(self, last: str = "") -> list[tuple[str, str]]:
        """Every command's help rows, command `last`'s at the end (`{defaults}` in a row
        stands for the default backends)."""
        specs = sorted(self.specs, key=lambda s: s.name == last)
        return [row for spec in specs for row in spec.help]

    def format(self, command: object) -> str:
        """The canonical text of a command: `parse_comment(format(c), ...) == [c]` for every
        command the parser can produce (a CommandError formats as its original line)."""
        if isinstance(command, CommandError):
            return command.line
        spec = self.spec_of(command)
        assert spec is not None, f"no command makes {type(command).__name__}"
        return spec.format(command)

    def parse_comment(
        self, body: str, backends: Mapping[str, str], default_backends: Sequence[str]
    ) -> list[Any]:
        """Every command of a comment body, one per command line, in order.

        `backends` maps every accepted spelling (name or alias) to the canonical backend name;
        `default_backends` are used for a SPEC that names none. Never raises on any text.
        """
        table = BackendTable(backends, default_backends)
        commands: list[Any] = []
        lines = command_lines(body)
        for line in lines[:MAX_COMMANDS]:
            try:
                commands.append(self.parse_line(line, table))
            except Invalid as exc:
                commands.append(CommandError(line, exc.message, exc.suggestions))
        if len(lines) > MAX_COMMANDS:
            more = len(lines) - MAX_COMMANDS
            message = (
                f"{more} more command lines were not read: one comment holds at most "
                f"{MAX_COMMANDS} commands; post the rest in another comment"
            )
            commands.append(CommandError(line=lines[MAX_COMMANDS], message=message))
        return commands

    def parse_line(self, line: str, table: BackendTable) -> Any:
        match = COMMAND_WORD.match(line)
        assert match is not None  # command_lines only yields command lines
        word = match.group(1).lower()
        words = split_words(line[match.end() :])
        head = words[0].lower() if words else ""
        mine = [s for s in self.specs if s.word == word]
        for spec in mine:
            if head in spec.subcommands:
                return spec.parse(words[1:], table)
        for spec in mine:
            if spec.claims is not None and spec.claims(words):
                return spec.parse(words, table)
        fallback = self._fallback if self._fallback in mine else None
        if fallback is None:
            raise Invalid(f"`/{word}` is not a command here.")
        near = self._meant_subcommand(head) if head not in table.folded else []
        if near:
            raise Invalid(
                f"unknown subcommand `{clip(words[0])}`: did you mean `/test {near[0]}`? "
                f"(To test an operator of that name, give its backend: `{head}:BACKEND`.)",
                near,
            )
        return fallback.parse(words, table)

    def _meant_subcommand(self, word: str) -> list[str]:
        """The subcommands a first word without a backend most likely misspells: a near miss
        (`cancle`) or a shortening of four letters or more (`accept`, `accept-reg`). An
        operator of such a name is still reachable as `word:BACKEND`."""
        if not word or is_flag(word) or ":" in word or "," in word:
            return []
        names = self.subcommand_names
        near = close(word, names, cutoff=0.75)
        spelled = word.replace("_", "-")
        shortened = [s for s in names if len(spelled) >= 4 and s.startswith(spelled)]
        return list(dict.fromkeys(near + shortened))
