"""`main:`, the default branch's own runs: on each push to it and once a night, with no pull
request, each operator compared with the previous default-branch commit that ran it; what a
run finds slower is kept as history and said where the repository asks (`alerts`). Pure."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

OnPush = Literal["none", "changed", "all"]
Nightly = Literal["none", "all"]
Alert = Literal["comment", "issue"]
ON_PUSH: tuple[OnPush, ...] = get_args(OnPush)
NIGHTLY: tuple[Nightly, ...] = get_args(Nightly)
ALERTS: tuple[Alert, ...] = get_args(Alert)
DEFAULT_WINDOW = 8  # the drift test's links: a row's last main runs, chained
MAX_WINDOW = 50
BACKEND_NAME = r"[a-z0-9][a-z0-9_-]{0,63}"
# What each choice field takes, for a problem that names the choices.
CHOICES: dict[str, tuple[str, ...]] = {"on_push": ON_PUSH, "nightly": NIGHTLY, "alerts": ALERTS}
SECTION_ERROR = "section"  # a custom error whose message is the whole problem


def _one_is_a_list(value: object) -> object:
    """`backends: nvidia` means `[nvidia]`."""
    return [value] if isinstance(value, str) else value


class MainSection(BaseModel):
    """`main:`: what runs on the default branch by itself, and where a regression is said."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    on_push: OnPush = Field(
        default="none",
        description="each push to the default branch: none, changed (the operators it "
        "changes, before..after) or all",
    )
    backends: Annotated[
        list[Annotated[str, Field(pattern=f"^{BACKEND_NAME}$")]], BeforeValidator(_one_is_a_list)
    ] = Field(default_factory=list, max_length=16, description="the backends the runs use")
    nightly: Nightly = Field(
        default="none", description="all: every operator once a night; none: no schedule"
    )
    alerts: Annotated[list[Alert], BeforeValidator(_one_is_a_list)] = Field(
        default_factory=lambda: ["comment", "issue"],
        max_length=len(ALERTS),
        description="where a row found slower is said: a comment on the merged pull "
        "request, an issue per operator and backend",
    )
    drift_window: int = Field(
        default=DEFAULT_WINDOW,
        ge=2,
        le=MAX_WINDOW,
        description="the drift test's window: a row's last N main runs, chained",
    )

    @model_validator(mode="after")
    def _runs_need_backends(self) -> MainSection:
        if (self.on_push != "none" or self.nightly != "none") and not self.backends:
            raise PydanticCustomError(
                SECTION_ERROR,
                "`backends` is missing: name the backends the default branch's runs use, "
                "like `backends: [nvidia]`",
            )
        return self

    @property
    def runs(self) -> bool:
        """Whether anything runs on the default branch by itself."""
        return bool(self.backends) and (self.on_push != "none" or self.nightly != "none")


def choices_problem(path: str, key: str, shown: str) -> str | None:
    """The problem of a value that is none of its field's choices (`main.on_push`), or None
    when `key` is not a choice field."""
    choices = CHOICES.get(key)
    if choices is None:
        return None
    what = "no value" if shown == "nothing" else f"{shown} is not a choice"
    listed = ", ".join(choices[:-1]) + f" or {choices[-1]}"
    return f"{path}: {what}: give {listed}"
