"""The reply about a malformed `.github/ondemand.yml`: what applies, each problem on its line,
and the file's own text escaped so it cannot break the comment or ping anyone."""

from __future__ import annotations

from service.render.config_replies import MAX_LISTED_PROBLEMS, render_problems
from workflows.repo_config import CONFIG_PATH, ConfigProblem, parse_repo_config


def test_one_problem() -> None:
    reading = parse_repo_config("compare:\n  gate: fail\n  threshold: 150%\n")
    body = render_problems(reading.problems, CONFIG_PATH, "main")
    assert body.splitlines()[:3] == [
        "⚠️ `.github/ondemand.yml` on `main` has a problem, so the defaults apply "
        "(threshold 10 %, gate inform):",
        "",
        '- line 3: compare.threshold: "150%" is not a threshold: give a percentage above 0 '
        "and below 100, like 10%",
    ]
    assert "read from the base branch, never from a pull request" in body


def test_several_problems_are_counted_and_capped() -> None:
    many = [ConfigProblem(i, f"problem {i}") for i in range(1, MAX_LISTED_PROBLEMS + 6)]
    body = render_problems(many, CONFIG_PATH, "main")
    assert f"has {len(many)} problems, so the defaults apply" in body
    assert "- line 20: problem 20" in body and "line 21" not in body
    assert "- … 5 more" in body
    assert render_problems([], CONFIG_PATH, "main") == ""


def test_the_files_text_is_escaped() -> None:
    text = "compare:\n  gate: '<img src=x> @alice `code` | *bold*'\n"
    (problem,) = parse_repo_config(text).problems
    body = render_problems([problem], CONFIG_PATH, "release/`v1`")
    line = body.splitlines()[2]
    assert "<img" not in line and "&lt;img" in line
    assert "@alice" not in line and "@\u2060alice" in line
    assert "\\`code\\`" in line and "\\|" in line and "\\*bold\\*" in line
    assert "on `` release/`v1` `` has a problem" in body  # a code span the ref cannot close
