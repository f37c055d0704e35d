"""Comment bodies as GitHub shows them, closely enough for the demo: rendered by the shared
renderer (raw HTML off: bodies are anyone's text), with HTML comments hidden."""

from __future__ import annotations

import re

from ondemand.markdown_html import markdown_html

_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)


def render(body: str) -> str:
    """Safe HTML of a comment's Markdown `body`."""
    return markdown_html(_COMMENT.sub("", body))
