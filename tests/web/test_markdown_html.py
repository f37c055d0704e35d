"""The shared Markdown renderer (`ondemand/markdown_html.py`) that the job page and the sandbox's
pages use: the raw HTML GitHub keeps becomes elements (the report's `<sub>` footer, collapsed
sections), hostile HTML comes out inert, and text the report escaped stays text."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from ondemand.markdown_html import markdown_html
from report.markdown import code_block, code_span, details, escape_text

FOOTER = "<sub>Arithmetic mean speedup: 1.64x, as FlagGems reports it.</sub>"
FORBIDDEN_TAGS = {
    "script", "style", "iframe", "frame", "svg", "math", "form", "input", "button", "textarea",
    "object", "embed", "meta", "base", "link", "template",
}  # fmt: skip
URL_ATTRIBUTES = {"href", "src", "cite", "srcset", "action", "formaction", "data", "xlink:href"}
SAFE_SCHEMES = {"http", "https", "mailto"}


class _Elements(HTMLParser):
    """Every start tag of a fragment with its attributes, and its text."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.text: list[str] = []
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, {name: value or "" for name, value in attrs}))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _inert(html: str) -> list[str]:
    """What in `html` could run, load or restyle something: empty when nothing can."""
    found: list[str] = []
    for tag, attrs in _Elements(html).elements:
        if tag in FORBIDDEN_TAGS:
            found.append(f"<{tag}>")
        for name, value in attrs.items():
            if name.startswith("on") or name in {"style", "srcdoc"}:
                found.append(f"{tag} {name}")
            scheme = "".join(value.split()).lower().partition(":")[0]
            if name in URL_ATTRIBUTES and ":" in value and scheme not in SAFE_SCHEMES:
                found.append(f"{tag} {name}={value}")
    return found


def test_the_footer_is_a_sub_element() -> None:
    html = markdown_html(f"Geometric mean speedup: **1.60x**\n\n{FOOTER}")
    assert f"<p>{FOOTER}</p>" in html
    assert "&lt;sub&gt;" not in html
    assert ("sub", {}) in _Elements(html).elements


def test_collapsed_sections_stay_elements() -> None:
    html = markdown_html(
        "### ✅ done\n\n" + details("Earlier runs (1)", "- #1 ❌ failed") + "\n\n"
        + details("traceback", code_block("Traceback\n  raise ValueError('<b>')"))
    )  # fmt: skip
    tags = [tag for tag, _ in _Elements(html).elements]
    assert tags.count("details") == 2 and tags.count("summary") == 2
    assert "<details><summary>Earlier runs (1)</summary>" in html
    assert "<li>#1 ❌ failed</li>" in html.split("<summary>Earlier runs (1)</summary>")[1]
    assert "raise ValueError('&lt;b&gt;')" in html and "<b>" not in html
    assert html.count("</details>") == 2
    assert "&lt;details&gt;" not in html and "&lt;summary&gt;" not in html


def test_sections_are_balanced_within_the_fragment() -> None:
    html = markdown_html("</details> stray\n\n<details><summary>open</summary>\n\nleft open")
    assert html.count("<details>") == html.count("</details>") == 1
    assert "&lt;/details&gt;" not in html
    assert html.index("<details>") < html.index("left open") < html.index("</details>")


@pytest.mark.parametrize(
    ("hostile", "kept"),
    [
        ("<script>alert(1)</script>\n\nafter", "after"),
        ("before <img src=x onerror=alert(1)>", "before"),
        ('<a href="javascript:alert(1)">click</a>', "click"),
        ('<a href="JaVaScRiPt&colon;alert(1)">click</a>', "click"),
        ('<a href="java&#x09;script:alert(1)">click</a>', "click"),
        ("[click](javascript:alert(1))", "click"),
        ('<iframe src="https://evil.example/"></iframe>framed', "framed"),
        ('<iframe srcdoc="<script>alert(1)</script>"></iframe>framed', "framed"),
        ('<p style="background:url(https://evil.example/)">styled</p>', "styled"),
        ("<style>body { display: none }</style>\n\nunstyled", "unstyled"),
        ("<svg onload=alert(1)><circle r=9 /></svg>drawn", "drawn"),
        ('<math><a xlink:href="javascript:alert(1)">m</a></math>maths', "maths"),
        ('<form action="https://evil.example/"><input name=a><button>go</button></form>x', "x"),
        ('<object data="x.swf"></object><embed src="x.swf">embedded', "embedded"),
        ('<meta http-equiv="refresh" content="0;url=https://evil.example/">stay', "stay"),
        ('<base href="https://evil.example/">based', "based"),
        ("<details open ontoggle=alert(1)><summary>s</summary>toggled</details>", "toggled"),
        ('<img src="data:image/svg+xml;base64,PHN2Zz48L3N2Zz4=">inline', "inline"),
        ("<b onclick=alert(1)>unclosed <i>tags", "unclosed"),
        ("<div>\n<script>alert(1)", ""),
        ("<scr<script>ipt>alert(1)</script>", ""),
    ],
)
def test_hostile_html_comes_out_inert(hostile: str, kept: str) -> None:
    html = markdown_html(hostile)
    assert _inert(html) == [], html
    assert kept in "".join(_Elements(html).text)
    assert "<script" not in html.lower()


def test_the_inertness_check_can_fail() -> None:
    assert _inert('<img src=x onerror=alert(1)><a href="javascript:x">a</a><style></style>') == [
        "img onerror", "a href=javascript:x", "<style>",
    ]  # fmt: skip


def test_links_keep_safe_urls_and_get_rel() -> None:
    html = markdown_html(
        "[job](https://ondemand.example/jobs/1) · <a href='/rel' target=_blank rel=opener>r</a>"
        " · <a href='mailto:a@example.com'>m</a>"
    )
    anchors = [attrs for tag, attrs in _Elements(html).elements if tag == "a"]
    assert [a.get("href") for a in anchors] == [
        "https://ondemand.example/jobs/1", "/rel", "mailto:a@example.com",
    ]  # fmt: skip
    assert all(a["rel"] == "noopener noreferrer nofollow" for a in anchors)
    assert all("target" not in a for a in anchors)


def test_escaped_text_stays_text() -> None:
    hostile = "<script>alert('owned')</script><img src=x onerror=alert(2)> <sub>x</sub>"
    html = markdown_html(
        f"{escape_text(hostile)}\n\n| cell |\n|---|\n| {code_span(hostile, table=True)} |\n\n"
        f"{code_block(hostile)}\n\n&lt;sub&gt;entity&lt;/sub&gt;"
    )
    tags = {tag for tag, _ in _Elements(html).elements}
    assert tags == {"p", "table", "thead", "tbody", "tr", "th", "td", "code", "pre"}
    assert html.count("&lt;script&gt;alert") == 3
    assert "&lt;sub&gt;entity&lt;/sub&gt;" in html


def test_comments_are_hidden_and_markdown_still_renders() -> None:
    html = markdown_html(
        "<!-- ondemand:add:cpu -->\n### ❌ `add` on `cpu`\n\n| a | b |\n|---:|:-:|\n| 1 | 2 |\n\n"
        "~~old~~ <!-- inline --> new<br>line"
    )
    assert "ondemand:add:cpu" not in html and "inline" not in html and "<!--" not in html
    assert "<h3>❌ <code>add</code> on <code>cpu</code></h3>" in html
    assert '<td align="right">1</td>' in html and '<th align="center">b</th>' in html
    assert "<s>old</s>" in html and "new<br>line" in html
