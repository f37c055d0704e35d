"""The reply that says the repository's settings file (`.github/ondemand.yml`, read from the
pull request's base) has problems, so the defaults apply. The problems quote the file, so
everything in them is escaped as untrusted text."""

from __future__ import annotations

from collections.abc import Sequence

from report.markdown import code_span, escape_text, plural
from workflows.repo_config import DEFAULTS, ConfigProblem

MAX_LISTED_PROBLEMS = 20
MAX_PROBLEM_CHARS = 300


def render_problems(problems: Sequence[ConfigProblem], path: str, ref: str) -> str:
    """`path` on `ref` has problems, so the defaults apply: one line per problem (the first
    20), by line number. Empty when there is no problem."""
    if not problems:
        return ""
    count = "a problem" if len(problems) == 1 else plural(len(problems), "problem")
    defaults = DEFAULTS.for_op("")
    lines = [
        f"⚠️ {code_span(path, 200)} on {code_span(ref, 100)} has {count}, so the defaults "
        f"apply ({defaults}):",
        "",
    ]
    for problem in problems[:MAX_LISTED_PROBLEMS]:
        lines.append(f"- line {problem.line}: {escape_text(problem.message, MAX_PROBLEM_CHARS)}")
    if len(problems) > MAX_LISTED_PROBLEMS:
        lines.append(f"- … {len(problems) - MAX_LISTED_PROBLEMS} more")
    lines += [
        "",
        "The file is read from the base branch, never from a pull request, so a fix counts "
        "once it is merged.",
    ]
    return "\n".join(lines) + "\n"
