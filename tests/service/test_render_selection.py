"""The selection reply (`service.render.selection`), rendered and then read back as GitHub shows
it: what was chosen and why, the limit, GitHub's file cap, and file names written to break the
reply (a pull request names its own files)."""

from __future__ import annotations

from ondemand.markdown_html import markdown_html as render_html
from report.selection import MAX_ROWS, SelectionReply, render_capped, render_selection


def reply(**fields: object) -> SelectionReply:
    values: dict[str, object] = {
        "who": "`/test changed:cpu`",
        "sha": "0123456789abcdef",
        "backends": ("cpu",),
        "files": 3,
    }
    values.update(fields)
    return SelectionReply(**values)  # type: ignore[arg-type]


def test_the_chosen_operators_with_why_and_the_files_touching_none() -> None:
    text = render_selection(
        reply(
            operators={
                "pool": ["kernels/ops/pool/rows.py: its own file"],
                "mm": ["src/x/utils.py: imported by src/x/ops/mm.py"],
            },
            unmatched=["README.md"],
        )
    )
    assert "at `0123456`: 2 operators changed (3 files read); 0 jobs queued on `cpu`." in text
    assert "| `pool` | `kernels/ops/pool/rows.py`: its own file |" in text
    assert "| `mm` | `src/x/utils.py`: imported by `src/x/ops/mm.py` |" in text
    assert "1 changed file touches no operator" in text and "`README.md`" in text


def test_past_the_limit_nothing_is_queued_and_the_reply_says_how() -> None:
    ops = {f"op{i:03d}": [f"shared.py: imported by ops/op{i:03d}.py"] for i in range(150)}
    text = render_selection(reply(operators=ops, over_limit=True, limit=20))
    assert "150 operators changed" in text and "limit of 20: nothing was queued" in text
    assert "`/test changed:cpu --all`" in text and "`/test op000,op001,op002:cpu`" in text
    assert text.count("| `op") == MAX_ROWS  # the rest are named in a collapsed list
    assert f"{150 - MAX_ROWS} more operators" in text and "`op149`" in text


def test_nothing_changed_and_the_cap() -> None:
    text = render_selection(reply(unmatched=["a.md", "b.md", "c.md"]))
    assert "none of the 3 changed files touches an operator, so nothing was queued" in text
    capped = render_capped("`/test changed:cpu,nvidia`", 3500, 3000, ("cpu", "nvidia"))
    assert "changes 3,500 files" in capped and "at most 3,000" in capped
    assert "`/test OP[,OP...]:cpu,nvidia`" in capped


def test_hostile_file_names_stay_text() -> None:
    """A file name with a pipe, backticks, HTML and a mention cannot break the table, inject
    markup or ping anyone."""
    evil = "a|b`<img src=x onerror=alert(1)>@everyone.py"
    text = render_selection(
        reply(operators={"pool": [f"{evil}: its own file"]}, unmatched=[f"docs/{evil}"])
    )
    html = render_html(text)
    assert "<img" not in html and "&lt;img" in html
    assert html.count("<tr>") == 2  # the header and one row: the pipe split nothing
    assert html.count("<td>") == 2
