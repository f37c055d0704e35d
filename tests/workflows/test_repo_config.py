"""`.github/ondemand.yml`: valid files and their policies per operator, and every kind of
malformed file answered with the defaults and its problems on the exact lines."""

from __future__ import annotations

import pytest

from workflows.repo_config import (
    CONFIG_PATH,
    DEFAULTS,
    MAX_CONFIG_BYTES,
    ComparePolicy,
    ConfigProblem,
    RepoConfig,
    format_threshold,
    parse_repo_config,
    too_large_reading,
)

DEFAULT_POLICY = ComparePolicy(threshold=0.10, gate="inform")


def problems(text: str) -> list[tuple[int, str]]:
    """The problems of a malformed file, asserting that the defaults apply to all of it."""
    reading = parse_repo_config(text)
    assert not reading.ok
    assert reading.config == DEFAULTS
    assert reading.config.for_op("adaptive_max_pool3d_backward") == DEFAULT_POLICY
    return [(p.line, p.message) for p in reading.problems]


def test_the_path_and_the_defaults() -> None:
    assert CONFIG_PATH == ".github/ondemand.yml"
    assert RepoConfig().for_op("anything") == DEFAULT_POLICY
    assert str(DEFAULT_POLICY) == "threshold 10 %, gate inform"


@pytest.mark.parametrize(
    "text",
    ["", "\n\n", "# only a comment\n# and another\n", "---\n", "compare:\n", "compare: {}\n"],
)
def test_an_empty_file_is_the_defaults_with_no_problem(text: str) -> None:
    reading = parse_repo_config(text)
    assert reading.ok and reading.problems == ()
    assert reading.config.for_op("x") == DEFAULT_POLICY


def test_repository_defaults_and_an_operator_override() -> None:
    text = """\
# .github/ondemand.yml
compare:
  threshold: 5%
  gate: fail
  operators:
    adaptive_max_pool3d_backward:
      threshold: 15%
    adaptive_max_pool3d:
      gate: inform
    _private_op2:
"""
    reading = parse_repo_config(text)
    assert reading.ok
    config = reading.config
    assert config.for_op("adaptive_max_pool3d_backward") == ComparePolicy(0.15, "fail")
    assert config.for_op("adaptive_max_pool3d") == ComparePolicy(0.05, "inform")
    assert config.for_op("_private_op2") == ComparePolicy(0.05, "fail")  # empty: no override
    assert config.for_op("unlisted") == ComparePolicy(0.05, "fail")


@pytest.mark.parametrize(
    ("written", "fraction"),
    [
        ("10%", 0.10),
        ("10 %", 0.10),
        ("2.5%", 0.025),
        ('"12%"', 0.12),
        ("0.1", 0.10),
        ("0.025", 0.025),
        ("99.5%", 0.995),
        (".5%", 0.005),
    ],
)
def test_thresholds_as_percentages_or_fractions(written: str, fraction: float) -> None:
    reading = parse_repo_config(f"compare:\n  threshold: {written}\n")
    assert reading.ok, reading.problems
    assert reading.config.for_op("x").threshold == pytest.approx(fraction)


def test_thresholds_are_shown_as_percentages() -> None:
    assert format_threshold(0.1) == "10 %"
    assert format_threshold(0.025) == "2.5 %"
    assert format_threshold(0.15) == "15 %"


@pytest.mark.parametrize(
    ("written", "shown", "hint"),
    [
        ("150%", '"150%"', ""),
        ("100%", '"100%"', ""),
        ("0%", '"0%"', ""),
        ("-5%", '"-5%"', ""),
        ("ten", '"ten"', ""),
        ('"0.1"', '"0.1"', ""),  # a string must say %
        ("10%%", '"10%%"', ""),
        ("1", '"1"', " (a bare number is a fraction: 0.1 is 10%)"),
        ("10", '"10"', " (a bare number is a fraction: 0.1 is 10%)"),
        ("0", '"0"', " (a bare number is a fraction: 0.1 is 10%)"),
        (".nan", '".nan"', " (a bare number is a fraction: 0.1 is 10%)"),
        ("true", '"true"', ""),
    ],
)
def test_a_bad_threshold(written: str, shown: str, hint: str) -> None:
    text = f"# settings\ncompare:\n  threshold: {written}\n  gate: fail\n"
    assert problems(text) == [
        (
            3,
            f"compare.threshold: {shown} is not a threshold: give a percentage above 0 and "
            f"below 100, like 10%{hint}",
        )
    ]


def test_the_threshold_of_the_brief() -> None:
    (problem,) = parse_repo_config("compare:\n  gate: fail\n  threshold: 150%\n").problems
    assert str(problem) == (
        'line 3: compare.threshold: "150%" is not a threshold: give a percentage above 0 and '
        "below 100, like 10%"
    )


def test_a_threshold_with_no_value_and_a_bad_operator_threshold() -> None:
    text = """\
compare:
  threshold:
  operators:
    adaptive_max_pool3d:
      threshold: 200%
"""
    assert problems(text) == [
        (2, "compare.threshold: no value: give a percentage above 0 and below 100, like 10%"),
        (
            5,
            'compare.operators.adaptive_max_pool3d.threshold: "200%" is not a threshold: give '
            "a percentage above 0 and below 100, like 10%",
        ),
    ]


def test_a_bad_gate() -> None:
    text = "compare:\n  threshold: 10%\n  gate: block\n  operators:\n    op:\n      gate: FAIL\n"
    assert problems(text) == [
        (3, 'compare.gate: "block" is not a gate: give inform or fail'),
        (6, 'compare.operators.op.gate: "FAIL" is not a gate: give inform or fail'),
    ]


def test_unknown_keys_on_their_lines_with_a_close_match() -> None:
    text = """\
compare:
  threshold: 10%
  thresold: 20%
  operators:
    adaptive_max_pool3d:
      gates: fail
on_push: true
"""
    assert problems(text) == [
        (
            3,
            'compare: unknown key "thresold"; did you mean threshold? known: threshold, gate, '
            "operators",
        ),
        (
            6,
            'compare.operators.adaptive_max_pool3d: unknown key "gates"; did you mean gate? '
            "known: threshold, gate",
        ),
        (
            7,
            'the file: unknown key "on_push"; known: compare, changes, failures, merge_queue, '
            "main",
        ),
    ]


@pytest.mark.parametrize(
    "name", ["Adaptive", "2d_pool", "max-pool", "a" * 65, "op.name", "'with space'", "3"]
)
def test_a_bad_operator_name(name: str) -> None:
    text = f"compare:\n  operators:\n    good_name:\n      gate: fail\n    {name}: {{}}\n"
    ((line, message),) = problems(text)
    assert line == 5
    assert message.startswith("compare.operators: ")
    assert message.endswith(
        " is not an operator name: lowercase letters, digits and _, not starting with a "
        "digit, at most 64"
    )


def test_an_operator_name_of_64_characters_is_fine() -> None:
    name = "a" * 64
    reading = parse_repo_config(f"compare:\n  operators:\n    {name}:\n      gate: fail\n")
    assert reading.ok and reading.config.for_op(name).gate == "fail"


def test_a_list_where_a_mapping_belongs() -> None:
    assert problems("compare:\n  - threshold: 10%\n  - gate: fail\n") == [
        (2, "compare: expected a mapping of keys (threshold, gate, operators), found a list")
    ]
    assert problems("compare:\n  operators:\n    - adaptive_max_pool3d\n") == [
        (3, "compare.operators: expected a mapping of names to settings, found a list")
    ]
    assert problems("compare:\n  operators:\n    op: fail\n") == [
        (3, 'compare.operators.op: expected a mapping of keys (threshold, gate), found "fail"')
    ]
    assert problems("\n- compare\n") == [
        (
            2,
            "the file: expected a mapping of keys (compare, changes, failures, merge_queue, "
            "main), "
            "found a list",
        )
    ]
    assert problems("just words\n") == [
        (
            1,
            "the file: expected a mapping of keys (compare, changes, failures, merge_queue, "
            "main), "
            'found "just words"',
        )
    ]


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (
            "compare:\n  threshold: 10%\n gate: fail\n",
            3,
            "not valid YAML: expected <block end>, but found '<block mapping start>' (while "
            "parsing a block mapping)",
        ),
        (
            "compare:\n  threshold: 10%\n  gate: [fail\n  operators: {}\n",
            4,
            "not valid YAML: expected ',' or ']', but got ':' (while parsing a flow sequence)",
        ),
        ("compare:\n\tgate: fail\n", 2, "not valid YAML: found character '\\t' that cannot "
         "start any token (while scanning for the next token)"),
        ("compare:\n  gate: fail\n---\ncompare: {}\n", 3, "not valid YAML: but found another "
         "document (expected a single document in the stream)"),
        ("compare:\n  gate: !fail x\n", 2, "not valid YAML: could not determine a constructor "
         "for the tag '!fail'"),
        ("compare:\n  gate: fail\x00\n", 2, "not valid YAML: character #x0000 is not allowed"),
    ],
)  # fmt: skip
def test_yaml_errors_name_their_line(text: str, line: int, message: str) -> None:
    assert problems(text) == [(line, message)]


def test_aliases_and_deep_nesting_are_refused_before_they_expand() -> None:
    text = "x: &x [1, 2]\ny: &y [*x, *x]\ncompare: {gate: fail}\n"
    assert problems(text) == [
        (2, "not valid YAML: an alias (*name) is not allowed here: write the value out")
    ]
    deep = "compare:\n  operators:\n    op: " + "[" * 5000 + "]" * 5000 + "\n"
    assert problems(deep) == [(3, "not valid YAML: nested more than 20 deep")]


def test_a_key_given_twice() -> None:
    assert problems("compare:\n  gate: fail\n  threshold: 5%\n  gate: inform\n") == [
        (4, "compare.gate: given twice (first on line 2)")
    ]


def test_over_64_kib_is_a_problem_on_line_1() -> None:
    text = "compare:\n  gate: fail\n" + "#" * MAX_CONFIG_BYTES
    size = len(text.encode())
    assert problems(text) == [(1, f"the file is {size:,} bytes; at most 65,536 (64 KiB) are read")]
    assert parse_repo_config("# é\n" * (MAX_CONFIG_BYTES // 6)).ok  # bytes, not characters
    assert not parse_repo_config("# é\n" * (MAX_CONFIG_BYTES // 4)).ok
    assert too_large_reading(2_000_000).problems == (
        ConfigProblem(1, "the file is 2,000,000 bytes; at most 65,536 (64 KiB) are read"),
    )


def test_all_the_problems_are_reported_in_line_order() -> None:
    text = """\
compare:
  gate: maybe
  threshold: 0
  colour: blue
  operators:
    Bad: {}
"""
    assert [line for line, _ in problems(text)] == [2, 3, 4, 6]


def test_long_values_are_clipped_in_messages() -> None:
    ((_, message),) = problems(f"compare:\n  gate: {'x' * 500}\n")
    assert message == f'compare.gate: "{"x" * 39}…" is not a gate: give inform or fail'


def test_the_model_is_strict_and_frozen() -> None:
    config = RepoConfig.model_validate({"compare": {"threshold": "20%"}})
    assert config.compare.threshold == pytest.approx(0.2)
    with pytest.raises(ValueError):
        RepoConfig.model_validate({"compare": {"treshold": "20%"}})
    with pytest.raises(ValueError):
        config.compare = config.compare  # type: ignore[misc]


def test_the_changes_section_limit_pushes_and_rules() -> None:
    reading = parse_repo_config(
        "changes:\n"
        "  limit: 5\n"
        "  on_push: nvidia\n"
        "  rules:\n"
        "    - paths: ['src/flag_gems/runtime/backend/_thead/*.py']\n"
        "      operators: [mm, addmm]\n"
    )
    assert reading.ok, reading.problems
    changes = reading.config.changes
    assert (changes.limit, changes.on_push) == (5, ["nvidia"])
    (rule,) = changes.selection_rules()
    assert rule.paths == ("src/flag_gems/runtime/backend/_thead/*.py",)
    assert rule.operators == ("mm", "addmm")
    assert DEFAULTS.changes.limit == 20 and DEFAULTS.changes.on_push == []


def test_changes_problems_point_into_the_rules() -> None:
    assert problems("changes:\n  limit: 0\n  rules:\n    - paths: [x]\n      operatrs: [mm]\n") == [
        (2, 'changes.limit: "0": Input should be greater than or equal to 1'),
        (4, "changes.rules.0: `operators` is missing"),
        (5, 'changes.rules.0: unknown key "operatrs"; did you mean operators? known: paths, '
            "operators"),
    ]  # fmt: skip
