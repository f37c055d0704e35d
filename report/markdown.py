"""Safe GitHub markdown from untrusted text: test output, log tails, names a runner reported.

Anything that came from a test run goes through one of these so it cannot break the comment's
structure (a `|` ending a table cell, a fence closing a code block early, HTML, an
`@mention` pinging someone) and is capped in length.
"""

from __future__ import annotations

import html
import math
import re
from datetime import UTC, datetime

ELLIPSIS = "…"
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_MD_SPECIAL = re.compile(r"([\\`*_\[\]{}<>()#+!|~])")
_MENTION = re.compile(r"@(?=[A-Za-z0-9])")
_WORD_JOINER = "\u2060"


def clean(text: str) -> str:
    """Drop ANSI colour codes and control characters; keep newlines and tabs."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _CONTROL.sub("", _ANSI.sub("", text))


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, ending in an ellipsis when cut."""
    if len(text) <= limit:
        return text
    return text[: max(limit - 1, 0)] + ELLIPSIS


def one_line(text: str, limit: int) -> str:
    """Whitespace runs (newlines included) become one space; then clipped."""
    return clip(" ".join(clean(text).split()), limit)


def escape_text(text: str, limit: int = 500) -> str:
    """Untrusted text as inline markdown that renders literally: one line, no HTML, no
    emphasis, no table breaks, no mentions."""
    text = one_line(text, limit)
    text = _MD_SPECIAL.sub(r"\\\1", html.escape(text, quote=False))
    return _MENTION.sub("@" + _WORD_JOINER, text)


def code_span(text: str, limit: int = 300, table: bool = False) -> str:
    """Untrusted text as one inline code span; in a table cell (`table`) its `|` is escaped,
    which GitHub undoes inside the span."""
    text = one_line(text, limit) or " "
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    span = f"{ticks}{pad}{text}{pad}{ticks}"
    return span.replace("|", "\\|") if table else span


def code_block(text: str, info: str = "") -> str:
    """Untrusted text as a fenced code block whose fence nothing inside can close."""
    body = clean(text).rstrip("\n")
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{body}\n{fence}"


def tail(text: str, max_lines: int, max_chars: int) -> tuple[str, int]:
    """The last lines of a log within both limits, and how many lines were left out."""
    lines = clean(text).rstrip("\n").split("\n")
    kept: list[str] = []
    size = 0
    for line in reversed(lines[-max_lines:] if max_lines > 0 else []):
        line = clip(line, max_chars)
        if kept and size + len(line) + 1 > max_chars:
            break
        kept.append(line)
        size += len(line) + 1
    kept.reverse()
    return "\n".join(kept), len(lines) - len(kept)


def log_block(text: str, max_lines: int, max_chars: int) -> str:
    """A log tail as a code block, saying how many earlier lines are not shown."""
    shown, omitted = tail(text, max_lines, max_chars)
    if omitted > 0:
        shown = f"{ELLIPSIS} {omitted} earlier line{'s' if omitted != 1 else ''}\n{shown}"
    return code_block(shown)


def details(summary: str, body: str) -> str:
    """A collapsed section; `summary` is escaped as HTML."""
    return f"<details><summary>{html.escape(summary)}</summary>\n\n{body}\n\n</details>"


def link(label: str, url: str) -> str:
    """A markdown link; a URL with spaces or parentheses is percent-encoded so it holds."""
    safe = url.replace(" ", "%20").replace("(", "%28").replace(")", "%29")
    safe = safe.replace("<", "%3C").replace(">", "%3E")
    return f"[{label}]({safe})"


def short_sha(sha: str) -> str:
    return sha[:7]


def duration(seconds: float | None) -> str:
    """`45.2s`, `3m 12s`, `1h 02m`."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "?"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def utc(moment: datetime) -> str:
    """`2026-11-30 12:03 UTC`; a naive datetime is taken to be UTC already."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def plural(count: int, word: str, many: str | None = None) -> str:
    return f"{count} {word if count == 1 else (many or word + 's')}"
