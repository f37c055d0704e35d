"""Which lines of a pull-request comment are commands, read as GitHub renders the comment.

A command starts a line of text as GitHub renders the comment (leading whitespace is fine,
unless it makes the line an indented code block). Code (fenced, indented or in a code span),
HTML comments and blocks, and quoted lines (`>`, and their lazy continuations) are never
commands, so quoting an earlier `/test` does not run it again. `/testing` is not `/test`.
Pure: markdown-it-py, no I/O.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.token import Token

COMMAND_WORD = re.compile(r"/(test|retest)(?=$|[\s|])", re.IGNORECASE)
_MARKDOWN = MarkdownIt("commonmark").enable(["table", "strikethrough"])
_HIDDEN = "\x00"  # stands for rendered text that is not a command's: code, HTML, struck out
_MARK_OPEN, _MARK_CLOSE = "\x01", "\x02"  # around a candidate line's number: inert text
_MARK = re.compile("\x01(\\d+)\x02")
_TEXT_BLOCKS = frozenset({"paragraph_open", "heading_open"})  # not table cells


def may_hold_commands(body: str) -> bool:
    """Whether any line of `body` starts with a command word: cheap, read on every delivery;
    `command_lines` then decides which of those lines GitHub shows as text."""
    return any(COMMAND_WORD.match(line.lstrip()) for line in body.splitlines())


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
        if COMMAND_WORD.match(stripped):
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
