"""What the default branch's alerts say, as pure functions: the comment on a merged pull
request (one sentence a row, a commit's regression or a drift), the issue's title, marker and
body (each row, recovered or not), the comment that closes it; names from a run escaped."""

from __future__ import annotations

from service.history.alerts_text import (
    DRIFT,
    SLOWER,
    IssueRow,
    RowFound,
    alert_tag,
    issue_marker,
    render_close_comment,
    render_issue_body,
    render_issue_title,
    render_merge_comment,
)
from workflows.models import Change

SLOW = Change(rounds=8, ratio=1.18, low=1.16, high=1.20)
DRIFTED = Change(rounds=8, ratio=1.125, low=1.105, high=1.145)
BACK = Change(rounds=8, ratio=1.0, low=0.99, high=1.01)
BASE, MERGE, LATER = "a" * 40, "b" * 40, "c" * 40


def test_the_merge_comment_says_each_row_in_one_sentence() -> None:
    rows = [
        RowFound("float16", "4096×4096", "device", SLOWER, SLOW, BASE),
        RowFound("float32", "64", "host", DRIFT, DRIFTED, BASE, links=3),
    ]
    text = render_merge_comment("gelu", "nvidia", MERGE, rows, 0.10, "http://x/jobs/7")
    assert (
        "this merge made `gelu` float16 4096×4096 +18.0 % ±1.7 % slower on `nvidia` "
        "(against aaaaaaa, the last default-branch commit that ran it)"
    ) in text
    assert (
        "the default branch drifted: `gelu` host time of float32 64 +12.5 % ±1.8 % slower on "
        "`nvidia` (over its last 3 runs, since aaaaaaa; none of them beyond the threshold alone)"
    ) in text
    assert "bbbbbbb ([job](http://x/jobs/7))" in text and "threshold 10 %" in text
    assert alert_tag(MERGE, "gelu", "nvidia") == "regression-bbbbbbbbbbbb-gelu-nvidia"


def test_the_issue_says_what_is_slower_and_what_recovered() -> None:
    found = RowFound("float16", "4096×4096", "device", SLOWER, SLOW, BASE)
    drifted = RowFound("float32", "64", "device", DRIFT, DRIFTED, BASE, links=3)
    rows = [IssueRow(found, MERGE, "http://x/jobs/7", LATER, BACK),
            IssueRow(drifted, LATER, "http://x/jobs/9")]  # fmt: skip
    assert render_issue_title("gelu", "nvidia") == (
        "Performance regression on the default branch: gelu on nvidia"
    )
    body = render_issue_body("gelu", "nvidia", rows, 0.10, closed=False)
    assert body.startswith(issue_marker("gelu", "nvidia") + "\n")
    assert "Open while a row below is slower." in body
    assert (
        "| float16 4096×4096 | +18.0 % ±1.7 % (one commit, 1 run) | [bbbbbbb](http://x/jobs/7) "
        "| aaaaaaa | recovered at ccccccc (+0.0 % ±1.0 %) |"
    ) in body
    assert "| float32 64 | +12.5 % ±1.8 % (drift, 3 runs) | [ccccccc](http://x/jobs/9) " in body
    assert body.rstrip().endswith("closed when every row has recovered.")
    closed = render_issue_body("gelu", "nvidia", rows[:1], 0.10, closed=True)
    assert "Every row below recovered." in closed
    note = render_close_comment("gelu", "nvidia", LATER, rows[:1])
    assert note == (
        "✅ The default branch's run of ccccccc found `gelu` on `nvidia` recovered "
        "(float16 4096×4096): closing."
    )


def test_names_from_a_run_are_escaped() -> None:
    hostile = RowFound("float16|@team", "4096<b>", "device", SLOWER, SLOW, BASE)
    text = render_merge_comment("gelu", "nvidia", MERGE, [hostile], 0.10, "http://x/jobs/7")
    assert "<b>" not in text and "@team" not in text and "float16|" not in text
