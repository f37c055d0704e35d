"""The result comment as HTML for the job page: rendered from its Markdown by markdown-it-py
with raw HTML disabled (the report holds text a pull request's tests wrote), the hidden marker
comment dropped, and the report's own collapsed sections (`<details><summary>`, written by
`service/render/markdown.details`) turned back into elements."""

from __future__ import annotations

import re

from ondemand.markdown_html import markdown_html

_MARKER = re.compile(r"^<!-- ondemand:[^\n]*-->\n?", re.MULTILINE)
_LINK = re.compile(r"<a href=")


def strip_marker(markdown: str) -> str:
    """The report without the hidden line by which the service finds its comment."""
    return _MARKER.sub("", markdown)


def report_html(markdown: str) -> str:
    """Safe HTML for the report `markdown`: every tag in it is one markdown-it made."""
    html = markdown_html(strip_marker(markdown))
    # Links leave the page without telling where from (job links of private repositories carry
    # their key) and never drive this window.
    return _LINK.sub('<a rel="noopener noreferrer nofollow" href=', html)
