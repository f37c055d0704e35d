"""The result comment as HTML for the job page, as GitHub shows it: rendered and sanitized by
the shared renderer (`ondemand.markdown_html`), which keeps the HTML the report writes itself
(its collapsed sections, the footer's `<sub>`), drops the hidden marker comment with every other
comment, and leaves inert whatever HTML a pull request's tests managed to put in it."""

from __future__ import annotations

from ondemand.markdown_html import markdown_html


def report_html(markdown: str) -> str:
    """Safe HTML for the report `markdown`."""
    return markdown_html(markdown)
