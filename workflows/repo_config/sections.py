"""The settings file's sections, each a strict model (an unknown key is a problem), and the
whole file (`RepoConfig`): `compare:`, `changes:`, `failures:`, `merge_queue:` here, `main:` in
`main_section.py`. Pure: pydantic only."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Annotated, Literal, get_args

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StringConstraints
from pydantic_core import PydanticCustomError

from workflows.changes import Rule
from workflows.repo_config.main_section import BACKEND_NAME, MainSection

DEFAULT_THRESHOLD = 0.10
DEFAULT_CHANGED_LIMIT = 20
MAX_RULES = 200

Gate = Literal["inform", "fail"]
GATES: tuple[Gate, ...] = ("inform", "fail")
OP_NAME = r"[a-z_][a-z0-9_]{0,63}"
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*%\s*$")


def format_threshold(fraction: float) -> str:
    """`0.1` → `10 %`, `0.025` → `2.5 %`."""
    return f"{round(fraction * 100, 6):g} %"


def _threshold(value: object) -> float:
    """`10%`, `10 %`, `2.5%` or a fraction `0.1`, as a fraction strictly between 0 and 1."""
    fraction: float | None = None
    if isinstance(value, str):
        match = _PERCENT.match(value)
        fraction = float(match.group(1)) / 100 if match else None
    elif isinstance(value, int | float) and not isinstance(value, bool):
        fraction = float(value)
    if fraction is None or not math.isfinite(fraction) or not 0 < fraction < 1:
        raise PydanticCustomError("threshold", "not a threshold")
    return fraction


def _none_is_empty(value: object) -> object:
    """A section left empty (`compare:` with everything under it commented out) is no
    setting, not a mistake."""
    return {} if value is None else value


def _one_is_a_list(value: object) -> object:
    """`on_push: nvidia` means `[nvidia]`."""
    return [value] if isinstance(value, str) else value


Threshold = Annotated[float, BeforeValidator(_threshold)]
OperatorName = Annotated[str, StringConstraints(pattern=f"^{OP_NAME}$")]
BackendName = Annotated[str, StringConstraints(pattern=f"^{BACKEND_NAME}$")]
PathGlob = Annotated[str, StringConstraints(min_length=1, max_length=300)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class OperatorCompare(_Section):
    """One operator's overrides; what it leaves out comes from the repository's defaults."""

    threshold: Threshold | None = None
    gate: Gate | None = None


class CompareSection(_Section):
    """`compare:`, the before → after performance comparison's regression gate."""

    threshold: Threshold = Field(
        default=DEFAULT_THRESHOLD,
        description="a row counts as slower or faster only when its whole 95 % interval lies "
        "beyond this change (a fraction)",
    )
    gate: Gate = Field(
        default="inform",
        description="inform: the report says it; fail: a significant regression fails the check",
    )
    operators: dict[OperatorName, Annotated[OperatorCompare, BeforeValidator(_none_is_empty)]] = (
        Field(default_factory=dict)
    )


@dataclass(frozen=True)
class ComparePolicy:
    """What applies to one operator's comparison: `threshold` a fraction (0.1 is 10 %)."""

    threshold: float
    gate: Gate

    def __str__(self) -> str:
        return f"threshold {format_threshold(self.threshold)}, gate {self.gate}"


class RuleEntry(_Section):
    """One of `changes.rules`: a change to a file matching one of `paths` selects
    `operators`."""

    paths: list[PathGlob] = Field(min_length=1, max_length=100)
    operators: list[OperatorName] = Field(min_length=1, max_length=1000)


class ChangesSection(_Section):
    """`changes:`, what `/test changed` selects and when it runs by itself."""

    limit: int = Field(
        default=DEFAULT_CHANGED_LIMIT,
        ge=1,
        le=1000,
        description="more operators than this run only with `--all`",
    )
    on_push: Annotated[list[BackendName], BeforeValidator(_one_is_a_list)] = Field(
        default_factory=list,
        max_length=16,
        description="backends to run the changed operators on when an author with write "
        "permission opens or pushes to a pull request",
    )
    rules: list[RuleEntry] = Field(default_factory=list, max_length=MAX_RULES)

    def selection_rules(self) -> tuple[Rule, ...]:
        return tuple(Rule(tuple(r.paths), tuple(r.operators)) for r in self.rules)


FailureGate = Literal["new", "already_failing", "flaky", "infrastructure"]
FAILURE_GATES: tuple[FailureGate, ...] = get_args(FailureGate)
DEFAULT_RERUNS = 4  # a test failing one time in three passes one of 4 re-runs 98.8 % of the time
DEFAULT_RERUN_BUDGET_S = 120
DEFAULT_RERUN_TESTS = 20


class FailuresSection(_Section):
    """`failures:`, how a failing accuracy step's failures are told apart (re-run by node id
    on the head and on the merge base) and which classes fail the job's check."""

    reruns: int = Field(
        default=DEFAULT_RERUNS,
        ge=0,
        le=20,
        description="re-runs of each failing test on the head (0: none, nothing classified)",
    )
    budget_s: int = Field(
        default=DEFAULT_RERUN_BUDGET_S,
        ge=0,
        le=3600,
        description="seconds all re-runs may take, head and merge base together",
    )
    max_tests: int = Field(
        default=DEFAULT_RERUN_TESTS, ge=1, le=500, description="failing tests re-run at most"
    )
    gate: Annotated[list[FailureGate], BeforeValidator(_one_is_a_list)] = Field(
        default_factory=lambda: ["new"],
        max_length=len(FAILURE_GATES),
        description="the classes that fail the check; an unclassified failure counts as new",
    )


MergeQueueRun = Literal["none", "changed"]


class MergeQueueSection(_Section):
    """`merge_queue:`, what a merge queue's group runs on its head (read at the group's base);
    its `ondemand` check stands for those jobs, or says success when nothing runs."""

    run: MergeQueueRun = Field(
        default="none",
        description="changed: the operators the group's pull request changes; none: nothing",
    )
    backends: Annotated[list[BackendName], BeforeValidator(_one_is_a_list)] = Field(
        default_factory=list, max_length=16, description="the backends they run on"
    )


class RepoConfig(_Section):
    """The whole file, one field per section (absent sections are their defaults)."""

    compare: Annotated[CompareSection, BeforeValidator(_none_is_empty)] = Field(
        default_factory=CompareSection
    )
    changes: Annotated[ChangesSection, BeforeValidator(_none_is_empty)] = Field(
        default_factory=ChangesSection
    )
    failures: Annotated[FailuresSection, BeforeValidator(_none_is_empty)] = Field(
        default_factory=FailuresSection
    )
    merge_queue: Annotated[MergeQueueSection, BeforeValidator(_none_is_empty)] = Field(
        default_factory=MergeQueueSection
    )
    main: Annotated[MainSection, BeforeValidator(_none_is_empty)] = Field(
        default_factory=MainSection
    )

    def for_op(self, op: str) -> ComparePolicy:
        """The comparison policy of `op`: its override over the repository's defaults."""
        override = self.compare.operators.get(op) or OperatorCompare()
        return ComparePolicy(
            threshold=(
                override.threshold if override.threshold is not None else self.compare.threshold
            ),
            gate=override.gate if override.gate is not None else self.compare.gate,
        )


DEFAULTS = RepoConfig()
