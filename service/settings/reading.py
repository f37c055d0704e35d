"""Reading the settings from the environment (`read_settings`): each problem one line naming
the variable, what is wrong with its value and the fix (`Problem`), then the rest read with
those variables unset; and where the settings came from, for the start-up line."""

from __future__ import annotations

import os
import re
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import annotated_types
from pydantic import ValidationError
from pydantic.fields import FieldInfo

from ondemand.options import one_line, shown
from service.settings.model import PREFIX, Settings, variable

# Settings are read from no other environment variable than those `read_settings` hands over.
_NOWHERE = "\0ONDEMAND_"


@dataclass(frozen=True)
class Problem:
    """A setting the service would refuse: the variable (or variables) it is about, and one
    line naming it, what is wrong with its value and the fix."""

    fields: tuple[str, ...]
    line: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "line", one_line(self.line))


PLACEHOLDER = re.compile(r"<[^<>]+>")
# Values never shown in a problem's line (the database URL is shown without its password).
SECRETS = frozenset({"webhook_secrets", "registration_tokens", "github_token", "link_secret",
                     "github_private_key"})  # fmt: skip


def read_settings(
    environ: Mapping[str, str] | None = None,
) -> tuple[Settings | None, list[Problem]]:
    """The settings from `environ` (the process's), and every problem of theirs as one line.

    A variable with a problem is then read as unset, so that what remains can still be checked
    (the doctor goes on with it); what only that fallback brings up is not reported. None when
    no settings can be made at all."""
    env = os.environ if environ is None else environ
    raw = {
        name: env[variable(name)]
        for name in Settings.model_fields
        if env.get(variable(name), "").strip()
    }
    # A line of the example environment file copied and not filled in.
    problems = [
        Problem((name,), f"{variable(name)} holds the example's placeholder {found.group()}: "
                "fill it in (docs/deploy.md)")
        for name, value in raw.items()
        if (found := PLACEHOLDER.search(value))
    ]  # fmt: skip
    for name in [p.fields[0] for p in problems]:
        raw.pop(name)
    for attempt in range(len(raw) + 1):
        try:
            return Settings(**raw, _env_prefix=_NOWHERE), problems  # type: ignore[arg-type]
        except ValidationError as exc:
            found = [_problem(error, raw) for error in exc.errors()]
        if attempt == 0:
            problems += found
        dropped = {f for p in found for f in p.fields} & raw.keys()
        if not dropped:
            break
        for name in dropped:
            raw.pop(name)
    return None, problems


def _problem(error: Any, raw: Mapping[str, str]) -> Problem:
    """One validation error as a `Problem`: a field's names its variable and the value it
    could not take (secrets left out); a check across fields names its variables itself."""
    message = str(error["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    loc = error.get("loc") or ()
    if not loc or loc[0] not in Settings.model_fields:
        names = re.findall(rf"{PREFIX}[A-Z0-9_]+", message)
        fields = tuple(dict.fromkeys(n.removeprefix(PREFIX).lower() for n in names))
        return Problem(fields, message)
    name = str(loc[0])
    field = Settings.model_fields[name]
    head = variable(name)
    if name not in SECRETS and name in raw:
        head += f"={_shown(name, raw[name])}"
    if error["type"] == "value_error":
        return Problem((name,), f"{head}: {message}")
    what = expected(field)
    default = _default(field)
    unset = f"unset it for the default ({default})" if default else "unset it"
    return Problem((name,), f"{head}: not {what}; set {what}, or {unset}")


def _shown(name: str, value: str) -> str:
    if name != "database_url":
        return shown(value)
    from sqlalchemy.engine import make_url

    try:
        return shown(make_url(value).render_as_string(hide_password=True))
    except Exception:  # unparseable: it may hold a password anywhere
        return "(not shown)"


def _base(annotation: Any) -> Any:
    """The type under Optional, Annotated and list (`list[int] | None` → list)."""
    while True:
        origin = typing.get_origin(annotation)
        if origin is Annotated:
            annotation = typing.get_args(annotation)[0]
        elif origin in (typing.Union, types.UnionType):
            annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
        else:
            return origin or annotation


def expected(field: FieldInfo) -> str:
    """What a field takes, in words, with its bounds: "a number ≥ 0"."""
    base = _base(field.annotation)
    words = {int: "a whole number", float: "a number", bool: "true or false", list:
             "a comma-separated list", Path: "a path"}  # fmt: skip
    bounds = [
        f"{sign} {limit:g}"
        for bound in field.metadata
        for attr, sign in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"))
        if isinstance(bound, annotated_types.BaseMetadata)
        and (limit := getattr(bound, attr, None)) is not None
    ]
    return (
        " and ".join([f"{words.get(base, 'a value')} {bounds[0]}", *bounds[1:]])
        if bounds
        else words.get(base, "a value")
    )


def _default(field: FieldInfo) -> str:
    value = field.default_factory() if field.default_factory else field.default  # type: ignore[call-arg]
    if value is None or value == [] or value == "":
        return ""
    if isinstance(value, list):
        return ",".join(map(str, value))
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def settings_source(environ: Mapping[str, str] | None = None) -> str:
    """Where the settings came from, for the start-up line: the `ONDEMAND_*` variables set
    (names only: values may be secret)."""
    names = sorted(
        k for k in (os.environ if environ is None else environ) if k.startswith("ONDEMAND_")
    )
    if not names:
        return "settings: defaults (no ONDEMAND_* variable is set)"
    return f"settings: {', '.join(names)} from the environment, defaults for the rest"
