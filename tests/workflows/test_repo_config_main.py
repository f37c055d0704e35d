"""`main:` in `.github/ondemand.yml`: the default branch's own runs (on push, nightly), where a
regression is said and the drift test's window; malformed values answered on their lines."""

from __future__ import annotations

import pytest

from workflows.repo_config import DEFAULTS, MainSection, parse_repo_config


def _problems(text: str) -> list[tuple[int, str]]:
    reading = parse_repo_config(text)
    assert not reading.ok and reading.config == DEFAULTS
    return [(p.line, p.message) for p in reading.problems]


def test_absent_main_runs_nothing_and_alerts_both_ways() -> None:
    main = DEFAULTS.main
    assert (main.on_push, main.nightly, main.backends) == ("none", "none", [])
    assert main.alerts == ["comment", "issue"] and main.drift_window == 8
    assert not main.runs


def test_the_brief_s_example_and_one_backend_as_a_word() -> None:
    reading = parse_repo_config(
        "main: {on_push: changed, backends: [nvidia, mthreads], nightly: all}\n"
    )
    assert reading.ok, reading.problems
    assert reading.config.main == MainSection(
        on_push="changed", backends=["nvidia", "mthreads"], nightly="all"
    )
    assert reading.config.main.runs
    text = "main:\n  on_push: all\n  backends: cpu\n  alerts: issue\n  drift_window: 3\n"
    main = parse_repo_config(text).config.main
    assert (main.on_push, main.backends, main.alerts, main.drift_window) == (
        "all", ["cpu"], ["issue"], 3,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "main:\n  on_push: sometimes\n  backends: [cpu]\n",
            (2, 'main.on_push: "sometimes" is not a choice: give none, changed or all'),
        ),
        (
            "main:\n  backends: [cpu]\n  nightly: weekly\n",
            (3, 'main.nightly: "weekly" is not a choice: give none or all'),
        ),
        (
            "main:\n  backends: [cpu]\n  alerts: [comment, email]\n",
            (3, 'main.alerts.1: "email" is not a choice: give comment or issue'),
        ),
        (
            "main:\n  on_push:\n  backends: [cpu]\n",
            (2, "main.on_push: no value: give none, changed or all"),
        ),
        (
            "main:\n  on_push: changed\n",
            (
                1,
                "main: `backends` is missing: name the backends the default branch's runs use, "
                "like `backends: [nvidia]`",
            ),
        ),
        (
            "compare:\n  gate: fail\nmain:\n  nightly: all\n  backends: []\n",
            (
                3,
                "main: `backends` is missing: name the backends the default branch's runs use, "
                "like `backends: [nvidia]`",
            ),
        ),
        (
            "main:\n  on_pushes: changed\n",
            (
                2,
                'main: unknown key "on_pushes"; did you mean on_push? known: on_push, backends, '
                "nightly, alerts, drift_window",
            ),
        ),
        (
            "main:\n  drift_window: 1\n",
            (2, 'main.drift_window: "1": Input should be greater than or equal to 2'),
        ),
        (
            "main:\n  backends: [NVIDIA]\n",
            (
                2,
                'main.backends.0: "NVIDIA": String should match pattern '
                "'^[a-z0-9][a-z0-9_-]{0,63}$'",
            ),
        ),
        (
            "main: [changed]\n",
            (
                1,
                "main: expected a mapping of keys (on_push, backends, nightly, alerts, "
                "drift_window), found a list",
            ),
        ),
    ],
)
def test_malformed_main_is_answered_on_its_line(text: str, expected: tuple[int, str]) -> None:
    assert _problems(text) == [expected]


def test_an_empty_main_is_the_defaults() -> None:
    reading = parse_repo_config("main:\n")
    assert reading.ok and reading.config.main == DEFAULTS.main
