"""Show a GitHub comment readably in a terminal: GitHub's HTML bits made plain, then Markdown."""

from __future__ import annotations

import html
import re

from rich.console import Console
from rich.markdown import Markdown

_COMMENT = re.compile(r"<!--.*?-->", re.S)
_SUMMARY = re.compile(r"<summary>(.*?)</summary>", re.S | re.I)
_TAG = re.compile(r"</?(details|summary|sub|sup|br|b|i|code|p)\b[^>]*>", re.I)


def plain_markdown(body: str) -> str:
    """The comment as Markdown without HTML: `<details>` sections open, summaries as bold lines."""
    text = _COMMENT.sub("", body)
    text = _SUMMARY.sub(lambda m: f"\n**▸ {m.group(1).strip()}**\n", text)
    text = _TAG.sub("", text)
    return html.unescape(text).strip()


def print_comment(console: Console, body: str) -> None:
    console.print(Markdown(plain_markdown(body)))
