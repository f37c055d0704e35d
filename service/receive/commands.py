"""Parse `/test` and `/retest` commands out of a pull-request comment: pure data in, data out.

Grammar:

    /test [|] SPEC [SPEC ...] [--no-bench] [--no-compare] [--new-op]
    SPEC := OPS [":" BACKENDS]     OPS := OP ("," OP)*     BACKENDS := BACKEND ("," BACKEND)*
    /test [changed[:BACKENDS]] [--all] [--no-bench] [--no-compare]
    /test help | /test ?           /test cancel [SPEC ...]           /retest
    /test accept-regression [SPEC ...]

A command starts a line of text as GitHub renders the comment (leading whitespace is fine,
unless it makes the line an indented code block). Code (fenced, indented or in a code span),
HTML comments and blocks, and quoted lines (`>`, and their lazy continuations) are never
commands, so quoting an earlier `/test` does not run it again. `/testing` is not `/test`.

Case: the command word, subcommands, flags and backend names are matched without regard to
case (phones capitalise `/Test`); all of them are lowercase in canonical form. Operator names
must be lowercase (`[a-z_][a-z0-9_]*`, at most 64 characters): `Add` is an error that suggests
`add`, because an operator name is passed on to the test selection as is.

Separators are forgiving: `|`, any run of spaces, and spaces around `:` and `,` all mean the
same thing. A SPEC with no backend uses the default backends. A lone bare word close to a
subcommand (`/test hlep`) is answered with "did you mean `help`"; name a backend
(`hlep:cpu`) to test an operator spelled like that.

Nothing here touches a shell or any I/O: the result is plain frozen dataclasses.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from markdown_it import MarkdownIt
from markdown_it.token import Token

MAX_OP_LEN = 64
MAX_TARGETS = 16  # jobs one command may start (after fan-out and deduplication)
MAX_COMMANDS = 20  # command lines read from one comment; the rest get one line of answer
OP_PATTERN = re.compile(r"[a-z_][a-z0-9_]*")
FLAGS = ("--no-bench", "--no-compare", "--new-op", "--all")
HELP_WORDS = ("help", "?", "--help", "-h")
ACCEPT = "accept-regression"
CHANGED = "changed"
SUBCOMMANDS = ("help", "cancel", ACCEPT, CHANGED)
USAGE = (
    "`/test OP[,OP...][:BACKEND[,BACKEND...]] ... [--no-bench] [--no-compare] [--new-op]`, "
    "`/test [changed[:BACKEND,...]] [--all]` (the operators this PR changes), "
    "`/test help`, `/test cancel [OP[:BACKEND]...]`, "
    "`/test accept-regression [OP[:BACKEND]...]`, `/retest`"
)

_COMMAND_WORD = re.compile(r"/(test|retest)(?=$|[\s|])", re.IGNORECASE)
_AROUND_PUNCT = re.compile(r"\s*([:,])\s*")
_DASH_FLAG = re.compile(r"^[\u2012\u2013\u2014\u2015]")  # a phone's "—no-bench" means "--no-bench"
_MARKDOWN = MarkdownIt("commonmark").enable(["table", "strikethrough"])
_HIDDEN = "\x00"  # stands for rendered text that is not a command's: code, HTML, struck out
_MARK_OPEN, _MARK_CLOSE = "\x01", "\x02"  # around a candidate line's number: inert text
_MARK = re.compile("\x01(\\d+)\x02")
_TEXT_BLOCKS = frozenset({"paragraph_open", "heading_open"})  # not table cells
_MAX_SUGGEST_LEN = 80  # difflib on longer words is slow and never a near miss


@dataclass(frozen=True)
class Target:
    """One job to run: an operator on a canonical backend name."""

    op: str
    backend: str


@dataclass(frozen=True)
class TestCommand:
    """`/test SPEC...`: the targets to run, deduplicated, in the order written."""

    __test__ = False  # not a pytest class

    targets: tuple[Target, ...]
    bench: bool = True
    compare: bool = True
    new_op: bool = False  # an operator the service does not know yet: run it anyway


@dataclass(frozen=True)
class ChangedCommand:
    """`/test changed[:BACKENDS]`, or `/test` alone: the operators the pull request changes,
    each on each backend; past the repository's limit only with `--all`."""

    backends: tuple[str, ...]
    everything: bool = False  # `--all`
    bench: bool = True
    compare: bool = True


@dataclass(frozen=True)
class HelpCommand:
    """`/test help` or `/test ?`."""


@dataclass(frozen=True)
class Selector:
    """Which jobs `/test cancel` means: an operator on one backend, or on any (None)."""

    op: str
    backend: str | None


@dataclass(frozen=True)
class CancelCommand:
    """`/test cancel [SPEC...]`; no selectors means all of the PR's queued or running jobs."""

    selectors: tuple[Selector, ...] = ()


@dataclass(frozen=True)
class AcceptCommand:
    """`/test accept-regression [SPEC...]`: a maintainer accepts the significant regression
    that failed the gate of this PR's latest jobs (those matching; all without selectors)."""

    selectors: tuple[Selector, ...] = ()


@dataclass(frozen=True)
class RetestCommand:
    """`/retest`: run again the PR's jobs whose last run failed or errored."""


@dataclass(frozen=True)
class CommandError:
    """A line that is a command but not a valid one: what was wrong and what is accepted."""

    line: str
    message: str
    suggestions: tuple[str, ...] = ()


Command = (
    TestCommand
    | ChangedCommand
    | HelpCommand
    | CancelCommand
    | AcceptCommand
    | RetestCommand
    | CommandError
)


class _Invalid(Exception):
    """Raised inside the parser only; always turned into a CommandError."""

    def __init__(self, message: str, suggestions: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.suggestions = tuple(suggestions)


def parse_comment(
    body: str, backends: Mapping[str, str], default_backends: Sequence[str]
) -> list[Command]:
    """Every command of a comment body, one per command line, in order.

    `backends` maps every accepted spelling (name or alias) to the canonical backend name;
    `default_backends` are used for a SPEC that names none. Never raises on any text.
    """
    table = _BackendTable(backends)
    defaults = _canonical_defaults(default_backends, table)
    commands: list[Command] = []
    lines = command_lines(body)
    for line in lines[:MAX_COMMANDS]:
        try:
            commands.append(_parse_line(line, table, defaults))
        except _Invalid as exc:
            commands.append(
                CommandError(line=line, message=exc.message, suggestions=exc.suggestions)
            )
    if len(lines) > MAX_COMMANDS:
        more = len(lines) - MAX_COMMANDS
        message = (
            f"{more} more command lines were not read: one comment holds at most "
            f"{MAX_COMMANDS} commands; post the rest in another comment"
        )
        commands.append(CommandError(line=lines[MAX_COMMANDS], message=message))
    return commands


def may_hold_commands(body: str) -> bool:
    """Whether any line of `body` starts with a command word: cheap, read on every delivery;
    `command_lines` then decides which of those lines GitHub shows as text."""
    return any(_COMMAND_WORD.match(line.lstrip()) for line in body.splitlines())


def command_lines(body: str) -> list[str]:
    """The lines of a comment that GitHub shows as text starting with `/test` or `/retest`,
    stripped, in order: never code (fenced, indented, or a code span), HTML (comments, tags),
    quotes (lazy continuation lines included) or struck-through text.

    The comment is read as GitHub renders it, by a CommonMark parser (with GitHub's tables and
    strikethrough): each candidate line gets a numbered marker at its start, and a candidate is
    a command when its marker starts a line of rendered text. The line itself is kept as
    written (rendering would turn `_x_` into emphasis)."""
    source = body.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    candidates: list[str] = []
    marked = list(source)
    for i, line in enumerate(source):
        stripped = line.lstrip()
        if _COMMAND_WORD.match(stripped):
            indent = line[: len(line) - len(stripped)]
            marked[i] = f"{indent}{_MARK_OPEN}{len(candidates)}{_MARK_CLOSE}{stripped}"
            candidates.append(line.strip())
    if not candidates:
        return []
    shown: set[int] = set()
    quoted = 0
    opened = ""  # the block the next inline run belongs to
    in_comment = False  # raw HTML opened a comment that has not closed yet: nothing shows
    for token in _MARKDOWN.parse("\n".join(marked)):
        if token.type == "html_block":
            in_comment = _in_comment_after(token.content, in_comment)
        elif token.type == "blockquote_open":
            quoted += 1
        elif token.type == "blockquote_close":
            quoted -= 1
        elif token.type.endswith("_open"):
            opened = token.type
        elif token.type == "inline" and token.children:
            lines, in_comment = _visible_lines(token.children, in_comment)
            if opened in _TEXT_BLOCKS and not quoted:
                for line in lines:
                    found = _MARK.match(line.lstrip())
                    if found:
                        shown.add(int(found.group(1)))
    return [candidates[k] for k in sorted(shown)]


def _in_comment_after(html: str, inside: bool) -> bool:
    """Whether raw HTML leaves a browser inside a comment, starting inside one or not."""
    pos = 0
    while True:
        if inside:
            end = html.find("-->", pos)
            if end < 0:
                return True
            inside, pos = False, end + 3
        else:
            start = html.find("<!--", pos)
            if start < 0:
                return False
            inside, pos = True, start + 4


def _visible_lines(children: list[Token], in_comment: bool) -> tuple[list[str], bool]:
    """The lines of rendered text of an inline run (a paragraph's or a heading's), and whether
    a comment is still open after it: line breaks split it; code spans, HTML, images,
    struck-through text and anything inside an open comment show as a placeholder."""
    lines = [""]
    struck = 0
    for child in children:
        kind = child.type
        if kind in ("softbreak", "hardbreak"):
            lines.append("")
        elif kind == "html_inline":
            in_comment = _in_comment_after(child.content, in_comment)
            lines[-1] += _HIDDEN
        elif kind == "s_open":
            struck += 1
        elif kind == "s_close":
            struck -= 1
        elif in_comment or struck or kind in ("code_inline", "image"):
            lines[-1] += _HIDDEN
        elif kind == "text":
            lines[-1] += child.content
    return lines, in_comment


def format_command(cmd: Command) -> str:
    """The canonical text of a command: `parse_comment(format_command(c), ...) == [c]` for
    every command the parser can produce (a CommandError formats as its original line)."""
    if isinstance(cmd, TestCommand):
        words = ["/test", *_format_specs([(t.op, t.backend) for t in cmd.targets])]
        if not cmd.bench:
            words.append("--no-bench")
        if not cmd.compare:
            words.append("--no-compare")
        if cmd.new_op:
            words.append("--new-op")
        return " ".join(words)
    if isinstance(cmd, ChangedCommand):
        words = ["/test", f"{CHANGED}:{','.join(cmd.backends)}"]
        if cmd.everything:
            words.append("--all")
        if not cmd.bench:
            words.append("--no-bench")
        if not cmd.compare:
            words.append("--no-compare")
        return " ".join(words)
    if isinstance(cmd, HelpCommand):
        return "/test help"
    if isinstance(cmd, CancelCommand):
        return " ".join(
            ["/test", "cancel", *_format_specs([(s.op, s.backend) for s in cmd.selectors])]
        )
    if isinstance(cmd, AcceptCommand):
        return " ".join(
            ["/test", ACCEPT, *_format_specs([(s.op, s.backend) for s in cmd.selectors])]
        )
    if isinstance(cmd, RetestCommand):
        return "/retest"
    return cmd.line


def _format_specs(pairs: Sequence[tuple[str, str | None]]) -> list[str]:
    """Group consecutive pairs of one operator into `op:b1,b2`; order is kept exactly."""
    specs: list[str] = []
    i = 0
    while i < len(pairs):
        op, backend = pairs[i]
        if backend is None:
            specs.append(op)
            i += 1
            continue
        group = [backend]
        i += 1
        while i < len(pairs) and pairs[i][0] == op and pairs[i][1] is not None:
            group.append(pairs[i][1])  # type: ignore[arg-type]
            i += 1
        specs.append(f"{op}:{','.join(group)}")
    return specs


class _BackendTable:
    """Backend spellings, looked up exactly first and then without regard to case."""

    def __init__(self, backends: Mapping[str, str]) -> None:
        self.exact = dict(backends)
        self.folded = {name.lower(): canonical for name, canonical in backends.items()}
        self.canonical = sorted(set(backends.values()))
        aliases: dict[str, list[str]] = {name: [] for name in self.canonical}
        for spelling, canonical in backends.items():
            if spelling != canonical:
                aliases[canonical].append(spelling)
        self.aliases = aliases

    def resolve(self, word: str) -> str | None:
        return self.exact.get(word) or self.folded.get(word.lower())

    def describe(self) -> str:
        """`` `cpu` (interpreter), `mthreads` (musa, moore_threads), `nvidia` (cuda) ``."""
        if not self.canonical:
            return "none are configured"
        parts = []
        for name in self.canonical:
            alias = self.aliases[name]
            parts.append(f"`{name}`" + (f" ({', '.join(alias)})" if alias else ""))
        return ", ".join(parts)


def _canonical_defaults(default_backends: Sequence[str], table: _BackendTable) -> tuple[str, ...]:
    """Default backends as canonical names, deduplicated; unknown ones pass through as given."""
    out: list[str] = []
    for name in default_backends:
        canonical = table.resolve(name) or name
        if canonical not in out:
            out.append(canonical)
    return tuple(out)


def _parse_line(line: str, table: _BackendTable, defaults: tuple[str, ...]) -> Command:
    match = _COMMAND_WORD.match(line)
    assert match is not None  # command_lines only yields command lines
    word = match.group(1).lower()
    words = _words(line[match.end() :])
    if word == "retest":
        if words:
            raise _Invalid(
                "`/retest` takes no arguments: it runs again this PR's jobs whose last run "
                "failed or errored. To run particular operators, use `/test OP:BACKEND`.",
                [f"/test {' '.join(words)}"],
            )
        return RetestCommand()
    head = words[0].lower() if words else ""
    if head in HELP_WORDS:
        return HelpCommand()
    if head == "cancel":
        return CancelCommand(
            _selectors(words[1:], table, "cancel", "cancels all of this PR's jobs")
        )
    if head == ACCEPT:
        return AcceptCommand(
            _selectors(words[1:], table, ACCEPT, "accepts every failed gate of this PR")
        )
    specs = [w for w in words if not _is_flag(w)]
    if not specs or any(CHANGED in w.lower().partition(":")[0].split(",") for w in specs):
        return _parse_changed(words, table, defaults)
    near = _meant_subcommand(head) if head not in table.folded else []
    if near:
        raise _Invalid(
            f"unknown subcommand `{_clip(words[0])}`: did you mean `/test {near[0]}`? "
            f"(To test an operator of that name, give its backend: `{head}:BACKEND`.)",
            near,
        )
    return _parse_test(words, table, defaults)


def _meant_subcommand(word: str) -> list[str]:
    """The subcommands a first word without a backend most likely misspells: a near miss
    (`cancle`) or a shortening of four letters or more (`accept`, `accept-reg`). An operator
    of such a name is still reachable as `word:BACKEND`."""
    if not word or _is_flag(word) or ":" in word or "," in word:
        return []
    near = _close(word, SUBCOMMANDS, cutoff=0.75)
    spelled = word.replace("_", "-")
    shortened = [s for s in SUBCOMMANDS if len(spelled) >= 4 and s.startswith(spelled)]
    return list(dict.fromkeys(near + shortened))


def _parse_changed(
    words: list[str], table: _BackendTable, defaults: tuple[str, ...]
) -> ChangedCommand:
    """`/test [changed[:BACKENDS]] [--all] [--no-bench] [--no-compare]`."""
    specs = [w for w in words if not _is_flag(w)]
    backends: list[str] = list(defaults)
    if specs:
        ops, colon, backends_text = specs[0].partition(":")
        if ops.lower() != CHANGED or len(specs) > 1:
            rest = [w for w in specs if CHANGED not in w.lower().partition(":")[0].split(",")]
            raise _Invalid(
                f"`{CHANGED}` stands alone: `/test {CHANGED}[:BACKEND,...]` runs the operators "
                "this pull request changes; to name operators too, post them as another "
                "command (`/test OP[:BACKEND]`).",
                [f"/test {' '.join(rest)}"] if rest else [],
            )
        if colon and not backends_text:
            raise _Invalid(
                f"`{_clip(specs[0])}` names no backend after `:`. Write "
                f"`/test {CHANGED}:BACKEND`, or `/test {CHANGED}` for the default backends."
            )
        if colon:
            words_ = _items(backends_text, specs[0], "backend")
            backends = list(dict.fromkeys(_backend(b, table) for b in words_))
    if not backends:
        raise _Invalid(
            "no default backend is configured: name the backends, e.g. "
            f"`/test {CHANGED}:BACKEND`; known backends: {table.describe()}."
        )
    flags = [_flag(w) for w in words if _is_flag(w)]
    if "--new-op" in flags:
        raise _Invalid(
            f"`--new-op` names an operator the service does not know; `/test {CHANGED}` finds "
            "the operators in the pull request itself, new ones included."
        )
    return ChangedCommand(
        backends=tuple(backends),
        everything="--all" in flags,
        bench="--no-bench" not in flags,
        compare="--no-compare" not in flags,
    )


def _words(rest: str) -> list[str]:
    """Split the text after the command word into words; `|` and spaces separate, and spaces
    around `:` and `,` are dropped so `op : backend` is one word."""
    rest = _AROUND_PUNCT.sub(r"\1", rest.replace("|", " ").strip())
    return rest.split()


def _is_flag(word: str) -> bool:
    return word.startswith("-") or bool(_DASH_FLAG.match(word))


def _parse_test(words: list[str], table: _BackendTable, defaults: tuple[str, ...]) -> TestCommand:
    bench = compare = True
    new_op = False
    targets: list[Target] = []
    for word in words:
        if _is_flag(word):
            flag = _flag(word)
            bench = bench and flag != "--no-bench"
            compare = compare and flag != "--no-compare"
            new_op = new_op or flag == "--new-op"
            if flag == "--all":
                raise _Invalid(
                    f"`--all` goes with `/test {CHANGED}` (past the limit of operators it "
                    "selects); `/test OP...` runs what it names."
                )
            continue
        ops, backend_words = _split_spec(word)
        if not backend_words:
            if not defaults:
                raise _Invalid(
                    f"`{_clip(word)}` names no backend and no default backend is configured. "
                    f"Name one, e.g. `{ops[0]}:BACKEND`; known backends: {table.describe()}."
                )
            _reject_backend_as_op(ops, targets, table)
            backends = list(defaults)
        else:
            backends = [_backend(b, table) for b in backend_words]
        _fan_out(
            targets,
            [Target(op, backend) for op in ops for backend in backends],
            f"too many jobs: at most {MAX_TARGETS} (operator, backend) pairs "
            "per command. Split it into several comments.",
        )
    return TestCommand(targets=tuple(targets), bench=bench, compare=compare, new_op=new_op)


_Item = TypeVar("_Item")


def _fan_out(found: list[_Item], items: Iterable[_Item], too_many: str) -> None:
    """Append the items not yet in `found`, in order; more than MAX_TARGETS is an error."""
    for item in items:
        if item not in found:
            found.append(item)
            if len(found) > MAX_TARGETS:
                raise _Invalid(too_many)


def _selectors(
    words: list[str], table: _BackendTable, sub: str, alone: str
) -> tuple[Selector, ...]:
    """The `OP[:BACKEND]` selectors of `/test cancel` or `/test accept-regression`."""
    selectors: list[Selector] = []
    for word in words:
        if _is_flag(word):
            raise _Invalid(
                f"`/test {sub}` takes no flags (got `{_clip(word)}`). "
                f"Accepted: `/test {sub}` (it {alone}) or `/test {sub} OP[:BACKEND]...`."
            )
        ops, backend_words = _split_spec(word)
        backends: list[str | None] = (
            [_backend(b, table) for b in backend_words] if backend_words else [None]
        )
        _fan_out(
            selectors,
            [Selector(op, backend) for op in ops for backend in backends],
            f"too many selectors: at most {MAX_TARGETS} per `/test {sub}`; "
            f"`/test {sub}` alone {alone}.",
        )
    return tuple(selectors)


def _split_spec(word: str) -> tuple[list[str], list[str]]:
    """`a,b:x,y` -> (["a", "b"], ["x", "y"]); operators validated, backends not yet."""
    if word.count(":") > 1:
        raise _Invalid(
            f"`{_clip(word)}` has more than one `:`. A spec is `OP[,OP...][:BACKEND[,BACKEND...]]`."
        )
    ops_text, colon, backends_text = word.partition(":")
    if not ops_text:
        raise _Invalid(f"`{_clip(word)}` names no operator before `:`. Write `OP:BACKEND`.")
    if colon and not backends_text:
        raise _Invalid(
            f"`{_clip(word)}` names no backend after `:`. Write `OP:BACKEND`, or `OP` alone "
            "for the default backends."
        )
    ops = [_op(op) for op in _items(ops_text, word, "operator")]
    backends = _items(backends_text, word, "backend") if colon else []
    return ops, backends


def _items(text: str, word: str, what: str) -> list[str]:
    items = text.split(",")
    if any(not item for item in items):
        raise _Invalid(f"`{_clip(word)}` has an empty {what} name between commas.")
    return items


def _op(name: str) -> str:
    if OP_PATTERN.fullmatch(name) and len(name) <= MAX_OP_LEN:
        return name
    if len(name) > MAX_OP_LEN:
        raise _Invalid(f"operator name `{_clip(name)}` is longer than {MAX_OP_LEN} characters.")
    fixed = re.sub(r"[^a-z0-9_]", "_", name.lower())
    suggestions = [fixed] if OP_PATTERN.fullmatch(fixed) and fixed != name else []
    hint = f" Did you mean `{fixed}`?" if suggestions else ""
    raise _Invalid(
        f"`{_clip(name)}` is not an operator name: operator names are lowercase letters, digits "
        f"and `_`, not starting with a digit, at most {MAX_OP_LEN} characters.{hint}",
        suggestions,
    )


def _backend(word: str, table: _BackendTable) -> str:
    canonical = table.resolve(word)
    if canonical is not None:
        return canonical
    near = _close(word.lower(), list(table.folded), cutoff=0.6)
    near_canonical = list(dict.fromkeys(table.folded[n] for n in near))
    hint = f" Did you mean `{near_canonical[0]}`?" if near_canonical else ""
    raise _Invalid(
        f"unknown backend `{_clip(word)}`.{hint} Known backends: {table.describe()}.",
        near_canonical,
    )


def _flag(word: str) -> str:
    flag = _DASH_FLAG.sub("--", word.lower())
    if flag in FLAGS:
        return flag
    near = _close(flag, FLAGS, cutoff=0.6)
    hint = f" Did you mean `{near[0]}`?" if near else ""
    raise _Invalid(
        f"unknown flag `{_clip(word)}`.{hint} Accepted flags: `--no-bench` (accuracy only), "
        "`--no-compare` (no benchmark of the base branch), `--new-op` (an operator this "
        f"pull request adds), `--all` (with `/test {CHANGED}`: past the limit).",
        near,
    )


def _reject_backend_as_op(ops: list[str], targets: list[Target], table: _BackendTable) -> None:
    """`/test add cpu` almost surely meant `add:cpu`: say so instead of testing an op `cpu`."""
    if all(table.resolve(op) is not None for op in ops):
        previous = targets[-1].op if targets else "OP"
        fix = f"{previous}:{','.join(ops)}"
        raise _Invalid(
            f"`{','.join(ops)}` is a backend, not an operator: join them with `:`, e.g. `{fix}`.",
            [fix] if targets else [],
        )


def _close(word: str, choices: Sequence[str], cutoff: float) -> list[str]:
    if len(word) > _MAX_SUGGEST_LEN:
        return []
    return difflib.get_close_matches(word, list(choices), n=3, cutoff=cutoff)


def _clip(text: str, limit: int = 80) -> str:
    """Shorten what we quote back; strip backticks so the quote stays one code span."""
    text = text.replace("`", "'")
    return text if len(text) <= limit else text[: limit - 1] + "…"
