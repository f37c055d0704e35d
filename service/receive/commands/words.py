"""The words commands share: targets and selectors, operator and backend names, flags, and the
error a command line becomes when it is not a valid one. Pure data in, data out.

Case: the command word, subcommands, flags and backend names are matched without regard to
case (phones capitalise `/Test`); all of them are lowercase in canonical form. Operator names
must be lowercase (`[a-z_][a-z0-9_]*`, at most 64 characters): `Add` is an error that suggests
`add`, because an operator name is passed on to the test selection as is.

Separators are forgiving: `|`, any run of spaces, and spaces around `:` and `,` all mean the
same thing. A SPEC is `OP[,OP...][:BACKEND[,BACKEND...]]`; one with no backend uses the
default backends.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

MAX_OP_LEN = 64
MAX_TARGETS = 16  # jobs one command may start (after fan-out and deduplication)
OP_PATTERN = re.compile(r"[a-z_][a-z0-9_]*")
FLAGS = ("--no-bench", "--no-compare", "--new-op", "--all")
CHANGED = "changed"
VS = "vs"  # `/test OP vs REF`: the word after it is a commit, never an operator


def without_refs(words: Sequence[str]) -> list[str]:
    """The words less each `vs` and the word after it (a grammar reading operators skips
    them)."""
    kept: list[str] = []
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word.lower() == VS:
            skip = True
        else:
            kept.append(word)
    return kept


_AROUND_PUNCT = re.compile(r"\s*([:,])\s*")
_DASH_FLAG = re.compile(r"^[\u2012\u2013\u2014\u2015]")  # a phone's "—no-bench" means "--no-bench"
_MAX_SUGGEST_LEN = 80  # difflib on longer words is slow and never a near miss


@dataclass(frozen=True)
class Target:
    """One job to run: an operator on a canonical backend name."""

    op: str
    backend: str


@dataclass(frozen=True)
class Selector:
    """Which jobs a command means: an operator on one backend, or on any (None)."""

    op: str
    backend: str | None

    def selects(self, op: str, backend: str) -> bool:
        return self.op == op and self.backend in (None, backend)

    def __str__(self) -> str:
        return self.op if self.backend is None else f"{self.op}:{self.backend}"


@dataclass(frozen=True)
class CommandError:
    """A line that is a command but not a valid one: what was wrong and what is accepted."""

    line: str
    message: str
    suggestions: tuple[str, ...] = ()


class Invalid(Exception):
    """Raised while parsing a line; always turned into a CommandError."""

    def __init__(self, message: str, suggestions: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.suggestions = tuple(suggestions)


class BackendTable:
    """Backend spellings, looked up exactly first and then without regard to case; and the
    default backends, as canonical names."""

    def __init__(self, backends: Mapping[str, str], default_backends: Sequence[str] = ()) -> None:
        self.exact = dict(backends)
        self.folded = {name.lower(): canonical for name, canonical in backends.items()}
        self.canonical = sorted(set(backends.values()))
        aliases: dict[str, list[str]] = {name: [] for name in self.canonical}
        for spelling, canonical in backends.items():
            if spelling != canonical:
                aliases[canonical].append(spelling)
        self.aliases = aliases
        # Unknown defaults pass through as given, deduplicated.
        self.defaults = tuple(dict.fromkeys(self.resolve(n) or n for n in default_backends))

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


def split_words(rest: str) -> list[str]:
    """Split the text after the command word into words; `|` and spaces separate, and spaces
    around `:` and `,` are dropped so `op : backend` is one word."""
    rest = _AROUND_PUNCT.sub(r"\1", rest.replace("|", " ").strip())
    return rest.split()


def is_flag(word: str) -> bool:
    return word.startswith("-") or bool(_DASH_FLAG.match(word))


def flag(word: str) -> str:
    """A flag's canonical spelling; an unknown flag is an error with its close matches."""
    canonical = _DASH_FLAG.sub("--", word.lower())
    if canonical in FLAGS:
        return canonical
    near = close(canonical, FLAGS, cutoff=0.6)
    hint = f" Did you mean `{near[0]}`?" if near else ""
    raise Invalid(
        f"unknown flag `{clip(word)}`.{hint} Accepted flags: `--no-bench` (accuracy only), "
        "`--no-compare` (no benchmark of the base branch), `--new-op` (an operator this "
        f"pull request adds), `--all` (with `/test {CHANGED}`: past the limit).",
        near,
    )


def flags_of(words: Sequence[str]) -> list[str]:
    return [flag(w) for w in words if is_flag(w)]


_Item = TypeVar("_Item")


def fan_out(found: list[_Item], items: Iterable[_Item], too_many: str) -> None:
    """Append the items not yet in `found`, in order; more than MAX_TARGETS is an error."""
    for item in items:
        if item not in found:
            found.append(item)
            if len(found) > MAX_TARGETS:
                raise Invalid(too_many)


def selectors(words: list[str], table: BackendTable, sub: str, alone: str) -> tuple[Selector, ...]:
    """The `OP[:BACKEND]` selectors of a subcommand such as `/test cancel`."""
    found: list[Selector] = []
    for word in words:
        if is_flag(word):
            raise Invalid(
                f"`/test {sub}` takes no flags (got `{clip(word)}`). "
                f"Accepted: `/test {sub}` (it {alone}) or `/test {sub} OP[:BACKEND]...`."
            )
        ops, backend_words = split_spec(word)
        backends: list[str | None] = (
            [backend(b, table) for b in backend_words] if backend_words else [None]
        )
        fan_out(
            found,
            [Selector(op, b) for op in ops for b in backends],
            f"too many selectors: at most {MAX_TARGETS} per `/test {sub}`; "
            f"`/test {sub}` alone {alone}.",
        )
    return tuple(found)


def split_spec(word: str) -> tuple[list[str], list[str]]:
    """`a,b:x,y` -> (["a", "b"], ["x", "y"]); operators validated, backends not yet."""
    if word.count(":") > 1:
        raise Invalid(
            f"`{clip(word)}` has more than one `:`. A spec is `OP[,OP...][:BACKEND[,BACKEND...]]`."
        )
    ops_text, colon, backends_text = word.partition(":")
    if not ops_text:
        raise Invalid(f"`{clip(word)}` names no operator before `:`. Write `OP:BACKEND`.")
    if colon and not backends_text:
        raise Invalid(
            f"`{clip(word)}` names no backend after `:`. Write `OP:BACKEND`, or `OP` alone "
            "for the default backends."
        )
    ops = [operator(op) for op in items(ops_text, word, "operator")]
    backends = items(backends_text, word, "backend") if colon else []
    return ops, backends


def items(text: str, word: str, what: str) -> list[str]:
    parts = text.split(",")
    if any(not part for part in parts):
        raise Invalid(f"`{clip(word)}` has an empty {what} name between commas.")
    return parts


def operator(name: str) -> str:
    if OP_PATTERN.fullmatch(name) and len(name) <= MAX_OP_LEN:
        return name
    if len(name) > MAX_OP_LEN:
        raise Invalid(f"operator name `{clip(name)}` is longer than {MAX_OP_LEN} characters.")
    fixed = re.sub(r"[^a-z0-9_]", "_", name.lower())
    suggestions = [fixed] if OP_PATTERN.fullmatch(fixed) and fixed != name else []
    hint = f" Did you mean `{fixed}`?" if suggestions else ""
    raise Invalid(
        f"`{clip(name)}` is not an operator name: operator names are lowercase letters, digits "
        f"and `_`, not starting with a digit, at most {MAX_OP_LEN} characters.{hint}",
        suggestions,
    )


def backend(word: str, table: BackendTable) -> str:
    canonical = table.resolve(word)
    if canonical is not None:
        return canonical
    near = close(word.lower(), list(table.folded), cutoff=0.6)
    near_canonical = list(dict.fromkeys(table.folded[n] for n in near))
    hint = f" Did you mean `{near_canonical[0]}`?" if near_canonical else ""
    raise Invalid(
        f"unknown backend `{clip(word)}`.{hint} Known backends: {table.describe()}.",
        near_canonical,
    )


def format_specs(pairs: Sequence[tuple[str, str | None]]) -> list[str]:
    """Group consecutive pairs of one operator into `op:b1,b2`; order is kept exactly."""
    specs: list[str] = []
    i = 0
    while i < len(pairs):
        op, first = pairs[i]
        if first is None:
            specs.append(op)
            i += 1
            continue
        group = [first]
        i += 1
        while i < len(pairs) and pairs[i][0] == op and pairs[i][1] is not None:
            group.append(pairs[i][1])  # type: ignore[arg-type]
            i += 1
        specs.append(f"{op}:{','.join(group)}")
    return specs


def close(word: str, choices: Sequence[str], cutoff: float) -> list[str]:
    if len(word) > _MAX_SUGGEST_LEN:
        return []
    return difflib.get_close_matches(word, list(choices), n=3, cutoff=cutoff)


def clip(text: str, limit: int = 80) -> str:
    """Shorten what we quote back; strip backticks so the quote stays one code span."""
    text = text.replace("`", "'")
    return text if len(text) <= limit else text[: limit - 1] + "…"
