"""Every misconfiguration is one line. For every setting of the service (each field of its one
settings object) and of the runner (each option of `ondemand runner`, and the variable it
reads where it has one), wrong values are made from what the setting is: its type, its bounds,
its kind of value (a URL, a file to read, a directory to make...). Each must be refused with
exit 2 by `ondemand serve`, `ondemand runner` and their doctors, in exactly one line on stderr
that names the variable or option typed, with no traceback. A setting added later is covered
by what its type says; one whose kind this test does not know fails it until it is told.

Each run is a real process (forked from one that imported the command line once,
`tests/support/exits.py`), unreadable files included: those cases run as `nobody`."""

from __future__ import annotations

import os
import shutil
import tempfile
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import annotated_types
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from pydantic import AfterValidator, SecretStr
from pydantic.fields import FieldInfo

from ondemand.options import Number
from runner.cli import TEXT, VALUES, daemon_parser, read_options
from service.settings import Check, Settings, read_settings, variable
from tests.support.exits import Case, Exit, exits_server

# Root reads any file: an unreadable file's case runs as `nobody`. Run as another user, the
# file's mode alone makes it unreadable.
ROOT_RUN = os.geteuid() == 0
UNPRIVILEGED = "nobody" if ROOT_RUN else None


@dataclass(frozen=True)
class Bad:
    """A wrong value, what makes it wrong, and the user to run as (None: root)."""

    value: str
    why: str
    user: str | None = None


@dataclass(frozen=True)
class Files:
    """Paths every kind of wrong value is made of, in a directory `nobody` can pass through."""

    root: Path

    @property
    def open(self) -> Path:  # writable by anyone: the database and caches of a `nobody` run
        return self.root / "open"

    def made(self) -> Files:
        self.root.chmod(0o755)
        self.open.mkdir(mode=0o777)
        self.open.chmod(0o777)
        (self.root / "a-directory").mkdir()
        (self.root / "empty-directory").mkdir()
        (self.root / "a-file").write_text("not what was asked for\n")
        (self.root / "empty").write_text("")
        (self.root / "unreadable").write_text("reg-token\n")
        (self.root / "unreadable").chmod(0o600 if ROOT_RUN else 0)  # root's: not `nobody`'s
        garbage = self.root / "garbage-workflows"
        garbage.mkdir()
        (garbage / "cpu.yaml").write_text("name: [unclosed\n")
        return self

    def path(self, name: str) -> str:
        return str(self.root / name)


def file_values(f: Files) -> list[Bad]:
    """A file the setting reads: missing, a directory, unreadable, of the wrong content."""
    return [
        Bad(f.path("missing"), "missing file"),
        Bad(f.path("a-directory"), "a directory"),
        Bad(f.path("a-file"), "garbage content"),
        Bad(f.path("unreadable"), "unreadable file", UNPRIVILEGED),
    ]


def workflows_values(f: Files) -> list[Bad]:
    return [
        Bad(f.path("missing"), "missing directory"),
        Bad(f.path("a-file"), "a file"),
        Bad(f.path("empty-directory"), "no workflow"),
        Bad(f.path("garbage-workflows"), "garbage content"),
    ]


def made_directory_values(f: Files) -> list[Bad]:
    return [Bad(f.path("a-file"), "a file"), Bad(f.path("a-file/below"), "under a file")]


# The service's kinds of value (`service.settings.Check.kind`) → wrong values of that kind.
SERVICE_KINDS: dict[str, Any] = {
    "url": lambda f: [Bad("ondemand.example.org", "no scheme"), Bad("ftp://x.org", "not http")],
    "database_url": lambda f: [
        Bad("ondemand:secret@db.internal/ondemand", "no scheme"),
        Bad("postgres://ondemand:secret@db.internal/ondemand", "unknown database"),
        Bad(f"sqlite:///{f.path('a-file')}/ondemand.db", "under a file"),
    ],
    "pem_file": file_values,
    "pem": lambda f: [Bad("-----BEGIN PRIVATE KEY-----\\ngarbage", "garbage content")],
    "workflows_dir": workflows_values,
    "cache_dir": made_directory_values,
    "team": lambda f: [Bad("octo-org", "not org/team")],
}
# The runner's (`runner.cli.VALUES`).
RUNNER_KINDS: dict[str, Any] = {
    "url": lambda f: [Bad("service.example.org", "no scheme")],
    "state": made_directory_values,
    "directory": lambda f: [Bad(f.path("missing"), "missing"), Bad(f.path("a-file"), "a file")],
    "workflows": workflows_values,
    "program": lambda f: [
        Bad(f.path("missing"), "missing file"),
        Bad(f.path("a-directory"), "a directory"),
        Bad(f.path("a-file"), "not executable"),
    ],
    "token_file": lambda f: [
        Bad(f.path("missing"), "missing file"),
        Bad(f.path("a-directory"), "a directory"),
        Bad(f.path("empty"), "empty file"),
        Bad(f.path("unreadable"), "unreadable file", UNPRIVILEGED),
    ],
}


def field_checks(field: FieldInfo) -> list[Check]:
    """A field's value checks: on the field itself, or anywhere in its type."""
    own = [m.func for m in field.metadata if isinstance(m, AfterValidator)]
    return [c for c in own if isinstance(c, Check)] + list(_checks(field.annotation))


def _checks(annotation: Any) -> Iterator[Check]:
    """The value checks anywhere in a type (under Optional, list, Annotated)."""
    if typing.get_origin(annotation) is Annotated:
        for meta in annotation.__metadata__:
            if isinstance(meta, AfterValidator) and isinstance(meta.func, Check):
                yield meta.func
    for arg in typing.get_args(annotation):
        yield from _checks(arg)


def _base(annotation: Any) -> Any:
    while True:
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        origin = typing.get_origin(annotation)
        if origin is Annotated or (origin is not None and origin is not list and args):
            annotation = args[0]
        else:
            return origin or annotation


def _bounds(kind: type, metadata: list[Any]) -> list[Bad]:
    """Values just outside each bound."""
    step = 1 if kind is int else 0.5
    out = []
    for bound in metadata:
        if isinstance(bound, annotated_types.Ge):
            out.append(Bad(f"{bound.ge - step:g}", "below its floor"))
        elif isinstance(bound, annotated_types.Gt):
            out.append(Bad(f"{bound.gt:g}", "at its exclusive floor"))
        elif isinstance(bound, annotated_types.Lt):
            out.append(Bad(f"{bound.lt:g}", "at its exclusive ceiling"))
        elif isinstance(bound, annotated_types.Le):
            out.append(Bad(f"{bound.le + step:g}", "above its ceiling"))
    return out


def service_values(field: FieldInfo, files: Files) -> list[Bad]:
    """Wrong values for a service setting, from its type, bounds and kinds of value."""
    base = _base(field.annotation)
    out: list[Bad] = []
    if base in (int, float):
        out += [Bad("abc", "not a number"), *_bounds(base, field.metadata)]
    elif base is bool:
        out.append(Bad("maybe", "not a boolean"))
    elif base is list:
        out.append(Bad('["unclosed', "not a list"))
    for check in field_checks(field):
        assert check.kind in SERVICE_KINDS, f"make wrong values of the kind {check.kind!r}"
        out += SERVICE_KINDS[check.kind](files)
    return out


def runner_values(action: Any, files: Files) -> list[Bad]:
    """Wrong values for an option of the runner, from its type, choices or kind of value."""
    if action.choices:
        return [Bad("nonsense", "not a choice")]
    if isinstance(action.type, Number):
        bounds: list[Any] = []
        if action.type.minimum is not None:
            floor = annotated_types.Gt if action.type.above else annotated_types.Ge
            bounds.append(floor(action.type.minimum))
        if action.type.maximum is not None:
            bounds.append(annotated_types.Le(action.type.maximum))
        return [Bad("abc", "not a number"), *_bounds(action.type.kind, bounds)]
    if action.type in (int, float):
        return [Bad("abc", "not a number")]
    if action.dest in VALUES:
        return RUNNER_KINDS[VALUES[action.dest].kind](files)
    return []


@pytest.fixture(scope="module")
def files() -> Iterator[Files]:
    root = Path(tempfile.mkdtemp(prefix="ondemand-misconfiguration-", dir="/tmp"))
    try:
        yield Files(root).made()
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def run_all() -> Iterator[Any]:
    with exits_server() as each:
        yield each


def _service_env(files: Files) -> dict[str, str]:
    """A service that starts (as a local trial): each case then spoils one setting."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(files.open),
        "ONDEMAND_DATABASE_URL": f"sqlite:///{files.open}/ondemand.db",
        "ONDEMAND_CHANGES_DIR": str(files.open / "changes"),
        "ONDEMAND_WEBHOOK_SECRETS": "s",
        "ONDEMAND_LOCAL_TRIAL": "1",
    }


def _one_line(result: Exit, name: str) -> None:
    """Exit 2, one line on stderr, naming `name`, no traceback."""
    where = f"{result.label}: {result.stderr!r}"
    assert not result.timed_out, f"{where}: accepted and started"
    assert "Traceback" not in result.stderr, where
    assert result.status == 2, f"{where}: exit {result.status}"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and name in lines[0], where


def service_cases(files: Files) -> list[tuple[str, Bad]]:
    """(field, wrong value) for every setting of the service that can be wrong by its form."""
    cases = [
        (name, bad)
        for name, field in Settings.model_fields.items()
        for bad in service_values(field, files)
    ]
    free = {
        name
        for name, field in Settings.model_fields.items()
        if _base(field.annotation) in (str, SecretStr) and not field_checks(field)
    }
    assert {name for name, _ in cases} | free == set(Settings.model_fields)
    assert len({name for name, _ in cases}) >= 25, "the settings lost their types?"
    return cases


def test_every_service_setting_refused_in_one_line(files: Files, run_all: Any) -> None:
    cases = service_cases(files)
    base = _service_env(files)
    runs = [
        Case(["serve", "--port", "1"], {**base, variable(name): bad.value}, str(files.open),
             bad.user, f"serve {variable(name)}={bad.value!r} ({bad.why})")
        for name, bad in cases
    ]  # fmt: skip
    # The doctor goes on to check the database: a case of each kind of problem that crashed it
    # before (a value pydantic refuses, a URL, a file) is enough.
    kinds = {"not a number", "no scheme", "missing file", "a directory", "garbage content",
             "unreadable file"}  # fmt: skip
    firsts = {bad.why: (name, bad) for name, bad in reversed(cases) if bad.why in kinds}
    assert set(firsts) == kinds
    runs += [
        Case(["doctor", "service"], {**base, variable(name): bad.value}, str(files.open),
             bad.user, f"doctor {variable(name)}={bad.value!r} ({bad.why})")
        for name, bad in firsts.values()
    ]  # fmt: skip
    for result in run_all(runs):
        _one_line(result, result.label.split("=")[0].split()[-1])


def _runner_base(files: Files) -> tuple[list[str], dict[str, str]]:
    argv = ["--service", "http://127.0.0.1:9", "--backend", "cpu", "--state-dir",
            str(files.open / "state"), "--no-job-user"]  # fmt: skip
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(files.open),
        "ONDEMAND_REGISTRATION_TOKEN": "reg-token",
    }
    return argv, env


def _without(argv: list[str], option: str) -> list[str]:
    if option not in argv:
        return argv
    at = argv.index(option)
    return argv[:at] + argv[at + 2 :]


def runner_cases(files: Files) -> list[tuple[str, list[str], dict[str, str], Bad]]:
    """(the name the line must say, argv, extra environment, wrong value) for every option of
    the runner, through its environment variable too where it has one."""
    argv, _ = _runner_base(files)
    cases = []
    for action in daemon_parser()._actions:
        if not action.option_strings or action.nargs == 0:
            continue  # help, flags: nothing to give wrong
        option = action.option_strings[0]
        bads = runner_values(action, files)
        if not bads:
            assert action.dest in TEXT, (
                f"{option}: say what its value must be (a Number type, choices, or its kind "
                "in runner.cli.VALUES), or that it is free text (runner.cli.TEXT)"
            )
            continue
        for bad in bads:
            cases.append((option, [*_without(argv, option), option, bad.value], {}, bad))
            env = VALUES[action.dest].env if action.dest in VALUES else None
            if env:
                cases.append((env, _without(argv, option), {env: bad.value}, bad))
    return cases


def test_every_runner_option_refused_in_one_line(files: Files, run_all: Any) -> None:
    cases = runner_cases(files)
    assert len({name for name, *_ in cases}) >= 15, "the runner's options lost their types?"
    _, env = _runner_base(files)
    # The doctor runs the daemon's checks: a case of each kind of problem is enough there.
    firsts = {bad.why: (name, argv, extra, bad) for name, argv, extra, bad in reversed(cases)}
    runs = [
        Case([*command, *argv], {**env, **extra}, str(files.open), bad.user,
             f"{command[0]} {name} {bad.value!r} ({bad.why})")
        for command, chosen in ((["runner"], cases), (["doctor", "runner"], firsts.values()))
        for name, argv, extra, bad in chosen
    ]  # fmt: skip
    for result in run_all(runs):
        _one_line(result, result.label.split()[1])


def test_the_token_file_is_read_only_when_the_runner_registers(
    files: Files, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A runner registered already starts whatever its token file says (the unit names the
    file for good); one that must register is refused in one line."""
    for name in [n for n in os.environ if n.startswith("ONDEMAND_")]:
        monkeypatch.delenv(name)
    service = "http://127.0.0.1:9"
    state = tmp_path / "state"
    state.mkdir()
    argv = ["--service", service, "--backend", "cpu", "--state-dir", str(state),
            "--no-job-user", "--registration-token-file", files.path("missing")]  # fmt: skip
    parser = daemon_parser()

    def problems() -> list[str]:
        return read_options(parser, parser.parse_args(argv), argv).problems

    (state / "runner.json").write_text(
        f'{{"service_url": "{service}", "runner_id": 1, "token": "t"}}'
    )
    assert problems() == []
    (state / "runner.json").write_text('{"service_url": "http://elsewhere", "runner_id": 1}')
    [line] = problems()
    assert line.startswith("--registration-token-file=") and "no such file" in line
    (state / "runner.json").write_text("{garbage")
    [line] = problems()
    assert "runner.json" in line and "delete it" in line


def test_a_valid_key_file_is_taken(tmp_path: Path) -> None:
    """The checks refuse what is wrong, not what is right: a real key, inline or in a file."""
    small = rsa.generate_private_key(public_exponent=65537, key_size=1024)  # quick to make
    private = small.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()
    key = tmp_path / "app.pem"
    key.write_text(private)
    env = {"ONDEMAND_GITHUB_APP_ID": "42", "ONDEMAND_GITHUB_PRIVATE_KEY_PATH": str(key),
           "ONDEMAND_DATABASE_URL": f"sqlite:///{tmp_path}/db",
           "ONDEMAND_CHANGES_DIR": str(tmp_path / "changes")}  # fmt: skip
    settings, problems = read_settings(env)
    assert problems == [] and settings is not None and settings.private_key() == private
    inline = {**env, "ONDEMAND_GITHUB_PRIVATE_KEY": private}
    [both] = read_settings(inline)[1]
    assert "both set" in both.line
