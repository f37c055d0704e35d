"""The comment command parser: the grammar, its errors, and (hypothesis) that no text makes it
raise and that every command it accepts round-trips through its canonical form."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from service.receive.commands import (
    MAX_COMMANDS,
    MAX_TARGETS,
    Command,
    CommandError,
    Selector,
    Target,
    command_lines,
    format_command,
    parse_comment,
)
from service.receive.commands.accept_regression import AcceptCommand
from service.receive.commands.cancel import CancelCommand
from service.receive.commands.changed import ChangedCommand
from service.receive.commands.help import HelpCommand
from service.receive.commands.retest import RetestCommand
from service.receive.commands.test import TestCommand
from workflows.spec import backend_names, load_workflows

BACKENDS = backend_names(load_workflows())  # the deployed workflows: cpu, mthreads, nvidia
CANONICAL = sorted(set(BACKENDS.values()))
DEFAULTS = ["mthreads"]


def parse(body: str, defaults: list[str] | None = None) -> list[Command]:
    return parse_comment(body, BACKENDS, DEFAULTS if defaults is None else defaults)


def one(body: str) -> Command:
    commands = parse(body)
    assert len(commands) == 1, commands
    return commands[0]


def error(body: str) -> CommandError:
    cmd = one(body)
    assert isinstance(cmd, CommandError), cmd
    return cmd


def test_the_seed_comment_means_the_operator_without_the_bar() -> None:
    assert one("/test | adaptive_max_pool3d_backward:mthreads") == TestCommand(
        (Target("adaptive_max_pool3d_backward", "mthreads"),)
    )


def test_deployed_backends_have_the_expected_spellings() -> None:
    assert CANONICAL == ["cpu", "mthreads", "nvidia"]
    assert BACKENDS["musa"] == "mthreads" and BACKENDS["cuda"] == "nvidia"


@pytest.mark.parametrize(
    "body",
    [
        "/test add:nvidia",
        "/test | add:nvidia",
        "/test|add:nvidia",
        "/test   add : nvidia",
        "/test add :nvidia",
        "/test add: nvidia",
        "   /test add:cuda",
        "/test add:NVIDIA",
        "/Test add:nvidia",
        "/TEST add:nvidia",
        "/test add:nvidia,cuda",
        "/test add:nvidia add:nvidia",
        "/test\t| | add:nvidia |",
        "Looks good.\n\t/test add:nvidia",  # indented, but a paragraph's continuation line
    ],
)
def test_forgiving_separators_case_and_aliases_mean_one_target(body: str) -> None:
    assert one(body) == TestCommand((Target("add", "nvidia"),))


def test_fan_out_is_ops_times_backends_in_order() -> None:
    cmd = one("/test add,mul:nvidia,musa")
    assert cmd == TestCommand(
        (
            Target("add", "nvidia"),
            Target("add", "mthreads"),
            Target("mul", "nvidia"),
            Target("mul", "mthreads"),
        )
    )


def test_spaces_around_commas_are_forgiven_and_duplicates_dropped_in_order() -> None:
    cmd = one("/test mul , add : cpu , interpreter add:cpu mul:nvidia")
    assert cmd == TestCommand((Target("mul", "cpu"), Target("add", "cpu"), Target("mul", "nvidia")))


def test_a_spec_without_backend_uses_the_defaults() -> None:
    cmd = parse("/test add", defaults=["cpu", "cuda", "nvidia"])
    assert cmd == [TestCommand((Target("add", "cpu"), Target("add", "nvidia")))]


def test_no_default_backend_is_an_error_naming_the_backends() -> None:
    [cmd] = parse("/test add", defaults=[])
    assert isinstance(cmd, CommandError)
    assert "no default backend" in cmd.message and "`mthreads`" in cmd.message


@pytest.mark.parametrize(
    ("body", "bench", "compare"),
    [
        ("/test add:cpu --no-bench", False, True),
        ("/test --no-compare add:cpu", True, False),
        ("/test add:cpu --no-bench --no-compare", False, False),
        ("/test add:cpu --NO-BENCH", False, True),
        ("/test add:cpu —no-bench", False, True),  # a phone's em dash
    ],
)
def test_flags(body: str, bench: bool, compare: bool) -> None:
    assert one(body) == TestCommand((Target("add", "cpu"),), bench=bench, compare=compare)


@pytest.mark.parametrize(
    "body", ["/test help", "/test ?", "/test HELP", "/test | help", "/test --help"]
)
def test_help(body: str) -> None:
    assert one(body) == HelpCommand()


def test_cancel_all_and_selected() -> None:
    assert one("/test cancel") == CancelCommand(())
    assert one("/test cancel add mul:cuda,cpu add") == CancelCommand(
        (Selector("add", None), Selector("mul", "nvidia"), Selector("mul", "cpu"))
    )


def test_accept_regression_all_and_selected() -> None:
    assert one("/test accept-regression") == AcceptCommand(())
    assert one("  /Test Accept-Regression  ") == AcceptCommand(())
    assert one("/test accept-regression op,op2:cpu") == AcceptCommand(
        (Selector("op", "cpu"), Selector("op2", "cpu"))
    )
    assert one("/test accept-regression op:cuda op2 op:nvidia") == AcceptCommand(
        (Selector("op", "nvidia"), Selector("op2", None))
    )


def test_accept_regression_selectors_follow_the_grammar() -> None:
    """`op:cpu,op2` is one operator on two backends, and `op2` is no backend."""
    err = error("/test accept-regression op:cpu,op2")
    assert "unknown backend `op2`" in err.message


def test_accept_regression_takes_no_flags() -> None:
    err = error("/test accept-regression add --no-bench")
    assert "`/test accept-regression` takes no flags (got `--no-bench`)" in err.message
    assert "`/test accept-regression OP[:BACKEND]...`" in err.message


@pytest.mark.parametrize(
    "typo",
    [
        "accept-regresion",
        "accept_regression",
        "acceptregression",
        "accept",
        "Accept-reg",
        "accept add:cpu",
        "accept_regression add mul:cpu",
    ],
)
def test_misspelt_accept_regression_gets_did_you_mean(typo: str) -> None:
    """A shortened or misspelt subcommand, alone or before selectors, is answered, not
    queued as an operator of that name on the default backends."""
    err = error(f"/test {typo}")
    assert err.suggestions == ("accept-regression",)
    assert "did you mean `/test accept-regression`?" in err.message
    assert f"`{typo.split()[0].lower()}:BACKEND`" in err.message


@pytest.mark.parametrize("body", ["/test accept:cpu", "/test acc", "/test cancel2:cpu add"])
def test_an_operator_named_like_a_subcommand_is_reachable_with_its_backend(body: str) -> None:
    command = one(body)
    assert isinstance(command, TestCommand)
    assert command.targets[0].op == body.split()[1].split(":")[0]


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("/test", ChangedCommand(("mthreads",))),
        ("/test changed", ChangedCommand(("mthreads",))),
        ("/Test CHANGED", ChangedCommand(("mthreads",))),
        ("/test | changed : cuda , cpu", ChangedCommand(("nvidia", "cpu"))),
        ("/test changed:cpu,cpu --all", ChangedCommand(("cpu",), everything=True)),
        ("/test --no-bench", ChangedCommand(("mthreads",), bench=False)),
        ("/test changed --no-compare —all", ChangedCommand(("mthreads",), True, compare=False)),
    ],
)
def test_changed_and_a_bare_test_select_from_the_diff(body: str, expected: Command) -> None:
    assert one(body) == expected


def test_changed_without_any_backend_is_an_error_naming_the_backends() -> None:
    err = parse("/test", defaults=[])[0]
    assert isinstance(err, CommandError)
    assert "changed:BACKEND" in err.message and "`nvidia` (cuda)" in err.message
    assert parse("/test changed:nvidia", defaults=[]) == [ChangedCommand(("nvidia",))]


def test_a_misspelt_changed_gets_did_you_mean() -> None:
    assert error("/test chnaged").suggestions == ("changed",)


def test_retest() -> None:
    assert one("/retest") == RetestCommand()
    assert one("  /Retest  ") == RetestCommand()


def test_retest_takes_no_arguments_and_points_at_test() -> None:
    err = error("/retest add:cpu")
    assert "takes no arguments" in err.message
    assert err.suggestions == ("/test add:cpu",)


@pytest.mark.parametrize(
    "body",
    [
        "/testing add:cpu",
        "/tests add",
        "/test-add",
        "/retesting",
        "please /test add:cpu",
        "`/test add:cpu`",
        "test add:cpu",
        "LGTM",
        "",
    ],
)
def test_text_that_is_not_a_command_is_ignored(body: str) -> None:
    assert parse(body) == []


def test_quotes_fences_and_html_comments_are_not_commands() -> None:
    body = "\n".join(
        [
            "> /test quoted:cpu",
            "  > /test quoted_too:cpu",
            "```",
            "/test in_backticks:cpu",
            "```",
            "~~~~ text",
            "/test in_tildes:cpu",
            "~~~",  # shorter than the opener: does not close it
            "/test still_in_tildes:cpu",
            "~~~~",
            "<!--",
            "/test in_html_comment:cpu",
            "-->",
            "```/test inline_code:cpu```",  # one-line inline code, not a fence
            "/test real:cpu",
        ]
    )
    assert parse(body) == [TestCommand((Target("real", "cpu"),))]


@pytest.mark.parametrize(
    "body",
    [
        "    /test add:cpu",  # an indented code block (4 spaces)
        "\t/test add:cpu",  # a tab is 4 columns: code too
        "Hello\n\n    /test add:cpu",  # after a blank line: code
        "- item\n\n      /test add:cpu",  # code inside a list item
        "text <!-- a comment\n/test add:cpu\n--> more",  # inside an inline HTML comment
        "`code span\n/test add:cpu`",  # inside a code span over two lines
        "> quote\n/test add:cpu",  # a lazy continuation of the quote
        "~~/test add:cpu~~",  # struck out
        "<div>\n/test add:cpu\n</div>",  # raw HTML block
    ],
)
def test_what_github_does_not_show_as_text_is_not_a_command(body: str) -> None:
    assert parse(body) == []


def test_a_command_in_an_open_details_block_is_text() -> None:
    body = "<details><summary>Log</summary>\n\n/test add:cpu\n\n</details>"
    assert parse(body) == [TestCommand((Target("add", "cpu"),))]


def test_a_comment_holds_a_bounded_number_of_commands() -> None:
    body = "\n".join(f"/test op{i}:cpu" for i in range(MAX_COMMANDS + 150))
    commands = parse(body)
    assert len(commands) == MAX_COMMANDS + 1
    assert all(isinstance(c, TestCommand) for c in commands[:MAX_COMMANDS])
    rest = commands[-1]
    assert isinstance(rest, CommandError)
    assert "150 more command lines" in rest.message and str(MAX_COMMANDS) in rest.message


def test_an_unclosed_fence_runs_to_the_end() -> None:
    assert parse("/test a:cpu\n```python\n/test b:cpu") == [TestCommand((Target("a", "cpu"),))]


def test_several_commands_one_per_line_in_order() -> None:
    body = "Thanks!\r\n/test add:cpu\r\nand also\n/test help\n/retest\n/test cancel add\n"
    assert parse(body) == [
        TestCommand((Target("add", "cpu"),)),
        HelpCommand(),
        RetestCommand(),
        CancelCommand((Selector("add", None),)),
    ]


def test_unknown_backend_suggests_and_lists_the_known_ones() -> None:
    err = error("/test add:mthread")
    assert err.suggestions[0] == "mthreads"
    assert "did you mean `mthreads`" in err.message.lower()
    for name in ("`cpu`", "`mthreads`", "`nvidia`", "cuda", "musa"):
        assert name in err.message


def test_unknown_backend_without_near_miss_still_lists_the_known_ones() -> None:
    err = error("/test add:rocm")
    assert err.suggestions == ()
    assert "unknown backend `rocm`" in err.message and "`nvidia`" in err.message


def test_misspelt_subcommand_gets_did_you_mean() -> None:
    assert error("/test hlep").suggestions == ("help",)
    assert error("/test cancle").suggestions == ("cancel",)
    # with a backend it is an operator of that name
    assert one("/test hlep:cpu") == TestCommand((Target("hlep", "cpu"),))


def test_misspelt_flag_gets_did_you_mean() -> None:
    err = error("/test add:cpu --no-bnch")
    assert err.suggestions == ("--no-bench",)
    assert "--no-compare" in err.message


def test_backend_written_as_an_operator_is_pointed_out() -> None:
    err = error("/test add cpu")
    assert err.suggestions == ("add:cpu",)
    assert "is a backend" in err.message


@pytest.mark.parametrize(
    ("body", "fragment", "suggestion"),
    [
        ("/test Add:cpu", "not an operator name", "add"),
        ("/test add-mul:cpu", "not an operator name", "add_mul"),
        ("/test 2add:cpu", "not an operator name", None),
        ("/test a:b:c", "more than one `:`", None),
        ("/test :cpu", "no operator", None),
        ("/test add:", "no backend", None),
        ("/test add,,mul:cpu", "empty operator", None),
        ("/test add:cpu,,nvidia", "empty backend", None),
        ("/test changed add:cpu", "stands alone", "/test add:cpu"),
        ("/test changed:", "no backend after", None),
        ("/test changed --new-op", "finds the operators", None),
        ("/test add:cpu --all", "goes with `/test changed`", None),
        ("/test cancel add --no-bench", "takes no flags", None),
        ("/test cancel add:gpu", "unknown backend", None),
        ("/test $(rm -rf ~):cpu", "not an operator name", None),
    ],
)
def test_errors_say_what_is_wrong(body: str, fragment: str, suggestion: str | None) -> None:
    err = error(body)
    assert fragment in err.message
    assert err.line == body.strip()
    if suggestion is not None:
        assert suggestion in err.suggestions


def test_operator_names_are_limited_to_64_characters() -> None:
    ok = "a" * 64
    assert one(f"/test {ok}:cpu") == TestCommand((Target(ok, "cpu"),))
    assert "longer than 64" in error(f"/test {ok}b:cpu").message


def test_too_many_targets_is_an_error_but_the_limit_itself_is_fine() -> None:
    ops = [f"op{i}" for i in range(MAX_TARGETS)]
    cmd = one(f"/test {','.join(ops)}:cpu")
    assert isinstance(cmd, TestCommand) and len(cmd.targets) == MAX_TARGETS
    err = error(f"/test {','.join(ops)}:cpu,nvidia")
    assert f"at most {MAX_TARGETS}" in err.message


def test_format_command_is_canonical() -> None:
    cmd = one("/Test | add , mul : cuda,musa  —no-bench")
    assert format_command(cmd) == "/test add:nvidia,mthreads mul:nvidia,mthreads --no-bench"
    assert format_command(HelpCommand()) == "/test help"
    assert format_command(RetestCommand()) == "/retest"
    assert format_command(CancelCommand(())) == "/test cancel"
    assert format_command(AcceptCommand(())) == "/test accept-regression"
    accept = one("/test ACCEPT-REGRESSION add:cuda , musa mul")
    assert format_command(accept) == "/test accept-regression add:nvidia,mthreads mul"
    assert format_command(error("/test add:tpu")) == "/test add:tpu"


def test_vs_names_the_commit_to_compare_with() -> None:
    cmd = one("/test add:cuda VS v1.0 --new-op")
    assert cmd == TestCommand((Target("add", "nvidia"),), new_op=True, against="v1.0")
    assert format_command(cmd) == "/test add:nvidia vs v1.0 --new-op"
    assert one("/test vs release/2.1 add:cpu").against == "release/2.1"  # type: ignore[union-attr]
    assert "names no commit" in error("/test add:cpu vs").message
    assert "names no commit" in error("/test add:cpu vs --no-bench").message
    assert "stands once" in error("/test add:cpu vs a vs b").message
    assert "not a branch, tag or commit" in error("/test add:cpu vs main..evil").message
    assert "not a branch, tag or commit" in error("/test add:cpu vs a:b").message
    assert one("/test add:cpu vs changed").against == "changed"  # type: ignore[union-attr]
    assert "`--no-compare` says not to" in error("/test add:cpu vs v1 --no-compare").message
    assert one("/test vs:cpu").targets == (Target("vs", "cpu"),)  # type: ignore[union-attr]


def test_command_lines_keeps_the_stripped_command_lines() -> None:
    assert command_lines("x\n  /test a  \n> /test b\n\n/retest") == ["/test a", "/retest"]


# --- hypothesis ------------------------------------------------------------------------------

OPS = st.from_regex(re.compile(r"[a-z_][a-z0-9_]{0,63}"), fullmatch=True)
WORDS = st.sampled_from(
    [
        "/test", "/retest", "/Test", "/testing", "|", ":", ",", " ", "  ", "\t", "\n", "\r\n",
        "--no-bench", "--no-compare", "--new-op", "—no-bench", "-", "--", "help", "?", "cancel",
        "hlep", "changed", "changed:cpu", "--all",
        "add", "Add", "cpu", "cuda", "musa", "mthreads", "nvidia", "tpu", "```", "~~~", ">",
        "<!--", "-->", "`", "a" * 70, "é", "\u2028", "\x00", "1", "_", ":cpu", "add,mul",
    ]
)  # fmt: skip
COMMANDISH = st.lists(WORDS, max_size=40).map("".join)


def _check_invariants(commands: list[Command]) -> None:
    for cmd in commands:
        assert isinstance(
            cmd,
            TestCommand
            | ChangedCommand
            | HelpCommand
            | CancelCommand
            | RetestCommand
            | CommandError,
        )
        if isinstance(cmd, ChangedCommand):
            assert cmd.backends and set(cmd.backends) <= set(CANONICAL)
        if isinstance(cmd, TestCommand):
            assert 1 <= len(cmd.targets) <= MAX_TARGETS
            assert len(set(cmd.targets)) == len(cmd.targets)
            for t in cmd.targets:
                assert re.fullmatch(r"[a-z_][a-z0-9_]{0,63}", t.op)
                assert t.backend in CANONICAL
        if isinstance(cmd, CommandError):
            assert cmd.message
            assert cmd.line.lower().startswith(("/test", "/retest"))
        if not isinstance(cmd, CommandError):
            # everything accepted round-trips
            assert parse(format_command(cmd)) == [cmd]


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_no_text_makes_the_parser_raise(body: str) -> None:
    _check_invariants(parse(body))


@settings(max_examples=600, deadline=None)
@given(COMMANDISH)
def test_no_commandish_text_makes_the_parser_raise(body: str) -> None:
    _check_invariants(parse(body))
    _check_invariants(parse("/test " + body))


TARGETS = st.lists(
    st.builds(Target, OPS, st.sampled_from(CANONICAL)),
    min_size=1,
    max_size=MAX_TARGETS,
    unique=True,
)
SELECTORS = st.lists(
    st.builds(Selector, OPS, st.none() | st.sampled_from(CANONICAL)),
    max_size=MAX_TARGETS,
    unique=True,
)
VALID = st.one_of(
    st.builds(TestCommand, TARGETS.map(tuple), st.booleans(), st.booleans(), st.booleans()),
    st.builds(
        TestCommand,
        TARGETS.map(tuple),
        new_op=st.booleans(),
        against=st.from_regex(re.compile(r"[A-Za-z0-9][A-Za-z0-9_]{0,20}"), fullmatch=True),
    ),
    st.builds(CancelCommand, SELECTORS.map(tuple)),
    st.builds(AcceptCommand, SELECTORS.map(tuple)),
    st.builds(
        ChangedCommand,
        st.lists(st.sampled_from(CANONICAL), min_size=1, unique=True).map(tuple),
        st.booleans(),
        st.booleans(),
        st.booleans(),
    ),
    st.just(HelpCommand()),
    st.just(RetestCommand()),
)


@settings(max_examples=400, deadline=None)
@given(VALID)
def test_every_valid_command_round_trips(cmd: Command) -> None:
    text = format_command(cmd)
    assert parse(text) == [cmd]
    # and again inside prose, behind a quote of itself and a fenced copy
    body = f"Please run:\n> {text}\n```\n{text}\n```\n  {text}\nthanks"
    assert parse(body) == [cmd]


ALIASES = {name: [s for s, c in BACKENDS.items() if c == name] for name in CANONICAL}


@settings(max_examples=300, deadline=None)
@given(TARGETS, st.data())
def test_messy_spellings_parse_to_the_same_targets(
    targets: list[Target], data: st.DataObject
) -> None:
    words = []
    for t in targets:
        alias = data.draw(st.sampled_from(ALIASES[t.backend]))
        alias = alias.upper() if data.draw(st.booleans()) else alias
        sep = data.draw(st.sampled_from([":", " : ", " :", ": "]))
        words.append(f"{t.op}{sep}{alias}")
    gap = data.draw(st.sampled_from([" ", "  ", " | ", "\t"]))
    cmd = one(f"/test |{gap}{gap.join(words)}")
    assert cmd == TestCommand(tuple(targets))


# --- what is text, with a CommonMark renderer as the oracle -----------------------------------

MARKDOWN_LINES = st.sampled_from(
    [
        "", "/test add:cpu", "/retest", "  /test mul:nvidia", "    /test code:cpu",
        "\t/test tab:cpu", "> /test quoted:cpu", "```", "~~~", "<!--", "-->", "<details>",
        "</details>", "text", "- item", "1. item", "   - /test listed:cpu", "`tick", "tock`",
        "~~", "# /test heading:cpu", "/test struck:cpu ~~", "<!-- /test c:cpu -->", "***",
        "---", "<div>", "</div>", "/test a:cpu <!--", "| a | b |", "|---|---|", "    ",
    ]
)  # fmt: skip


class _RenderedText(HTMLParser):
    """The lines of text a browser shows in paragraphs, headings and list items, outside
    quotes; code, struck-out text and other hidden spans leave a placeholder."""

    HIDDEN = frozenset({"code", "pre", "s", "del", "img"})
    TEXT_BLOCKS = frozenset({"p", "h1", "h2", "h3", "h4", "h5", "h6", "li"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.lines: list[str] = []

    def _in_text(self) -> bool:
        blocks = [t for t in self.stack if t in self.TEXT_BLOCKS | {"blockquote", "div"}]
        return bool(blocks) and blocks[-1] in self.TEXT_BLOCKS and "blockquote" not in self.stack

    def handle_starttag(self, tag: str, attrs: object) -> None:
        if tag in self.TEXT_BLOCKS or tag == "br":
            self.lines.append("")
        elif tag in self.HIDDEN and self._in_text() and self.lines:
            self.lines[-1] += "\x00"
        if tag not in ("br", "img", "hr", "input"):
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.stack:
            while self.stack.pop() != tag:
                pass
        if tag in self.TEXT_BLOCKS:
            self.lines.append("")

    def handle_data(self, data: str) -> None:
        if not self._in_text() or any(t in self.HIDDEN for t in self.stack):
            return
        first, *rest = data.split("\n")
        self.lines[-1] += first
        self.lines.extend(rest)


def _comments_closed(html: str) -> str:
    """The HTML a browser shows: a comment never closed hides everything after it (the
    standard parser's rule), where Python's parser would wait for more input."""
    start = html.find("<!--")
    while start >= 0:
        end = html.find("-->", start + 4)
        if end < 0:
            return html[:start]
        start = html.find("<!--", end + 3)
    return html


def _shown_commands(body: str) -> list[str]:
    """Rendered lines of text that start with a command and were written as a line that does
    (a heading's `#` or a list's `-` makes a line that is not a command)."""
    parser = _RenderedText()
    parser.feed(
        _comments_closed(MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(body))
    )
    written = [line.strip() for line in body.split("\n")]
    shown = [line.strip() for line in parser.lines]
    return [
        line
        for line in shown
        if re.match(r"/(test|retest)(\s|$)", line) and any(w.startswith(line) for w in written)
    ]


@settings(max_examples=400, deadline=None)
@given(st.lists(MARKDOWN_LINES, max_size=14))
def test_commands_are_the_lines_github_shows_as_text(lines: list[str]) -> None:
    body = "\n".join(lines)
    first_words = [line.split()[:2] for line in command_lines(body)]
    assert first_words == [line.split()[:2] for line in _shown_commands(body)]
