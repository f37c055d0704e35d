"""Comment bodies as GitHub shows them, closely enough for the demo: rendered by the shared
renderer, which keeps the raw HTML GitHub keeps, drops the rest and hides HTML comments."""

from __future__ import annotations

from ondemand.markdown_html import markdown_html


def render(body: str) -> str:
    """Safe HTML of a comment's Markdown `body`."""
    return markdown_html(body)
