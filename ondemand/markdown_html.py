"""Markdown as GitHub shows it, closely enough for our pages and the sandbox's: markdown-it-py
with GitHub's tables and strikethrough, raw HTML off (the text is anyone's), and the collapsed
sections our reports write (`<details><summary>`) turned back into elements."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

# With HTML off, a collapsed section arrives as escaped paragraphs; only these exact shapes
# become elements again, and their summary stays the escaped text it is.
_SECTION = re.compile(
    r"<p>&lt;details&gt;&lt;summary&gt;(?P<summary>.*?)&lt;/summary&gt;</p>|<p>&lt;/details&gt;</p>"
)

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
_md.enable(["table", "strikethrough"])


def markdown_html(text: str) -> str:
    """Safe HTML of `text`: every tag in it is one markdown-it made, or a section's."""
    return _sections(_md.render(text))


def _sections(html: str) -> str:
    """The escaped `<details><summary>…</summary>` and `</details>` paragraphs as elements,
    in order, every one opened also closed."""
    opened = 0

    def _element(match: re.Match[str]) -> str:
        nonlocal opened
        if match.group("summary") is not None:
            opened += 1
            return f"<details><summary>{match.group('summary')}</summary>"
        if not opened:
            return match.group(0)
        opened -= 1
        return "</details>"

    html = _SECTION.sub(_element, html)
    return html + "</details>" * opened
