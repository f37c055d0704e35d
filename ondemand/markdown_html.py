"""Markdown as GitHub shows it, closely enough for our pages and the sandbox's: markdown-it-py
with GitHub's tables and strikethrough and raw HTML on, then sanitized by nh3 (ammonia) with an
allow-list modelled on GitHub's, so the HTML GitHub keeps in a comment (`<sub>`, collapsed
sections, `<br>`, …) renders here too, and the HTML it drops (scripts, styles, frames, forms,
event handlers, `javascript:` links) is dropped here, with HTML comments."""

from __future__ import annotations

import nh3
from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore

_HEADINGS = {f"h{n}" for n in range(1, 7)}

# GitHub's sanitization allow-list, less what our pages have no use for (ids, class names,
# inline styles, form controls).
TAGS: frozenset[str] = frozenset(
    {
        "a", "abbr", "b", "bdo", "blockquote", "br", "caption", "cite", "code", "dd", "del",
        "details", "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "hr", "i", "img",
        "ins", "kbd", "li", "mark", "ol", "p", "picture", "pre", "q", "rp", "rt", "ruby", "s",
        "samp", "small", "source", "span", "strike", "strong", "sub", "summary", "sup", "table",
        "tbody", "td", "tfoot", "th", "thead", "time", "tr", "tt", "ul", "var", "wbr",
        *_HEADINGS,
    }
)  # fmt: skip

# Tags whose content goes with them: left as text it would show a script's or a style's source.
DROPPED_WITH_CONTENT: frozenset[str] = frozenset(
    {
        "script", "style", "iframe", "frame", "frameset", "object", "embed", "noscript",
        "noembed", "noframes", "template", "textarea", "select", "title", "xmp", "svg", "math",
    }
)  # fmt: skip

_ALIGNED = {"div", "p", "table", "thead", "tbody", "tfoot", "tr", "caption", *_HEADINGS}
ATTRIBUTES: dict[str, set[str]] = {
    "*": {"title", "lang", "dir"},
    "a": {"href"},
    "img": {"src", "alt", "width", "height", "align"},
    "source": {"srcset", "media", "type", "width", "height"},
    "td": {"align", "valign", "colspan", "rowspan"},
    "th": {"align", "valign", "colspan", "rowspan", "scope"},
    "ol": {"start", "type"},
    "li": {"value"},
    "details": {"open"},
    "time": {"datetime"},
    **{tag: {"cite"} for tag in ("blockquote", "del", "ins", "q")},
    **{tag: {"align"} for tag in _ALIGNED},
}

# Every URL attribute (`href`, `src`, `cite`) is one of these, or relative.
URL_SCHEMES: frozenset[str] = frozenset({"http", "https", "mailto"})

# Links never tell where they came from (job links of private repositories carry their key),
# never drive the page that opened them, and lend their target no ranking.
LINK_REL = "noopener noreferrer nofollow"


def _table_alignment(state: StateCore) -> None:
    """A table column's alignment as GitHub writes it (`align="right"`), not as markdown-it
    does (`style="text-align:right"`), which the sanitizer would drop."""
    for token in state.tokens:
        style = token.attrs.get("style")
        if isinstance(style, str) and style.startswith("text-align:"):
            del token.attrs["style"]
            token.attrSet("align", style.removeprefix("text-align:"))


_md = MarkdownIt("commonmark", {"html": True, "linkify": False, "typographer": False})
_md.enable(["table", "strikethrough"])
_md.core.ruler.push("table_alignment", _table_alignment)


def sanitize(html: str) -> str:
    """`html` with only the allow-listed tags, attributes and URL schemes left, comments gone,
    and every link given `LINK_REL`."""
    return nh3.clean(
        html,
        tags=set(TAGS),
        clean_content_tags=set(DROPPED_WITH_CONTENT),
        attributes=ATTRIBUTES,
        url_schemes=set(URL_SCHEMES),
        link_rel=LINK_REL,
        strip_comments=True,
    )


def markdown_html(text: str) -> str:
    """Safe HTML of the Markdown `text`, as GitHub would render it."""
    return sanitize(_md.render(text))
