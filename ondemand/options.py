"""What the daemons share to refuse a setting in one line: the value checks (a URL, a
directory, a file that must be read), a number with bounds, and a command-line parser whose
errors are one line. Each check returns why a value is wrong, or None; the caller names the
environment variable or option the operator typed (`service/settings/`, `runner/cli.py`)."""

from __future__ import annotations

import argparse
import os
import pwd
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit

SHOWN_MAX = 80


def shown(value: object) -> str:
    """A value as a problem's line quotes it: on one line, cut to a readable length."""
    text = repr(str(value))
    return text if len(text) <= SHOWN_MAX else text[: SHOWN_MAX - 4] + "…" + text[-1]


def one_line(text: str) -> str:
    """`text` on one line (a YAML parser's or a driver's message spans several)."""
    return " ".join(text.split())


def who() -> str:
    """This process's user, as a problem about a file it cannot read names it."""
    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return f"uid {os.geteuid()}"


def url_problem(text: str) -> str | None:
    """Why `text` is not an http(s) URL with a host, or None."""
    try:
        parts = urlsplit(text)
        host = parts.hostname
    except ValueError as exc:
        return f"not a URL ({exc})"
    if parts.scheme not in ("http", "https") or not host:
        return "not an http(s) URL"
    return None


def directory_problem(path: Path, *, create: bool) -> str | None:
    """Why `path` cannot serve as a directory (`create`: one this process makes and writes
    in, so it must exist or be creatable), or None."""
    if path.exists():
        if not path.is_dir():
            return "not a directory"
        wanted = os.R_OK | os.X_OK | (os.W_OK if create else 0)
        if not os.access(path, wanted):
            return f"not {'writable' if create else 'readable'} by {who()}"
        return None
    if not create:
        return "no such directory"
    parent = path.absolute().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        return f"cannot be made: {parent} is not a directory"
    if not os.access(parent, os.W_OK | os.X_OK):
        return f"cannot be made: {parent} is not writable by {who()}"
    return None


def read_file(path: Path) -> str:
    """The text of a file a setting names; ValueError saying in a few words why not (missing,
    a directory, unreadable by this user, not text)."""
    if not path.exists():
        raise ValueError("no such file")
    if path.is_dir():
        raise ValueError("a directory, not a file")
    try:
        return path.read_text()
    except PermissionError:
        raise ValueError(f"not readable by {who()}") from None
    except UnicodeDecodeError:
        raise ValueError("not text") from None
    except OSError as exc:
        raise ValueError(f"unreadable ({exc.strerror or exc})") from None


@dataclass(frozen=True)
class Number:
    """An option's `type`: an int or a float within bounds; its refusal states them, and the
    settings test reads them to make values out of range."""

    kind: type[int] | type[float]
    minimum: float | None = None
    above: bool = False  # the minimum itself is refused
    maximum: float | None = None

    @property
    def __name__(self) -> str:  # argparse names a type by it
        return self.describe()

    def describe(self) -> str:
        what = "a whole number" if self.kind is int else "a number"
        if self.minimum is not None and self.maximum is not None and not self.above:
            return f"{what} from {self.minimum:g} to {self.maximum:g}"
        if self.minimum is not None:
            what += f" {'>' if self.above else '≥'} {self.minimum:g}"
        if self.maximum is not None:
            what += f" ≤ {self.maximum:g}"
        return what

    def __call__(self, text: str) -> int | float:
        try:
            value = self.kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{shown(text)} is not {self.describe()}") from None
        low = self.minimum
        if (low is not None and (value < low or (self.above and value == low))) or (
            self.maximum is not None and value > self.maximum
        ):
            raise argparse.ArgumentTypeError(f"{value:g} is not {self.describe()}")
        return value


class OneLineParser(argparse.ArgumentParser):
    """argparse whose refusals are one line (no usage block): the units read the journal, and a
    refused option exits 2, which they do not restart. Options are never abbreviated, so a
    problem names the option as it was typed."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (`{self.prog} --help` lists the options)\n")
