"""The result comment as HTML for the job page: rendered from its Markdown by markdown-it-py
with raw HTML disabled (the report holds text a pull request's tests wrote), the hidden marker
comment dropped, and the report's own collapsed sections (`<details><summary>`, written by
`service/render/markdown.details`) turned back into elements."""

from __future__ import annotations

import re

from markdown_it import MarkdownIt

_MARKER = re.compile(r"^<!-- ondemand:[^\n]*-->\n?", re.MULTILINE)
# With HTML disabled, the report's collapsed sections arrive as escaped paragraphs; only these
# exact shapes become elements again, and their summary stays the escaped text it is.
_SECTION = re.compile(
    r"<p>&lt;details&gt;&lt;summary&gt;(?P<summary>.*?)&lt;/summary&gt;</p>|<p>&lt;/details&gt;</p>"
)
_LINK = re.compile(r"<a href=")

_md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
_md.enable(["table", "strikethrough"])


def strip_marker(markdown: str) -> str:
    """The report without the hidden line by which the service finds its comment."""
    return _MARKER.sub("", markdown)


def report_html(markdown: str) -> str:
    """Safe HTML for the report `markdown`: every tag in it is one markdown-it made."""
    html = _sections(_md.render(strip_marker(markdown)))
    # Links leave the page without telling where from (job links of private repositories carry
    # their key) and never drive this window.
    return _LINK.sub('<a rel="noopener noreferrer nofollow" href=', html)


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
