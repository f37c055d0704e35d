"""Comment bodies as GitHub shows them, closely enough for the demo: Markdown rendered by
markdown-it-py with raw HTML off (bodies are anyone's text), HTML comments hidden, and
`<details><summary>` sections, which GitHub keeps, turned back into elements."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_SECTION = re.compile(
    r"<p>&lt;details&gt;&lt;summary&gt;(?P<summary>.*?)&lt;/summary&gt;</p>|<p>&lt;/details&gt;</p>"
)

_md = MarkdownIt("commonmark", {"html": False}).enable(["table", "strikethrough"])


def render(body: str) -> str:
    """Safe HTML of a comment's Markdown `body`."""
    return _sections(_md.render(_COMMENT.sub("", body)))


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
