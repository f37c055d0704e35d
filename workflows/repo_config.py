"""The tested repository's own settings, `.github/ondemand.yml`, read from the pull request's
base (never its head, so a pull request cannot loosen its own gate).

```yaml
compare:
  threshold: 10%        # a row is slower/faster only when its whole 95 % interval lies beyond
  gate: inform          # inform: the report says it; fail: a significant regression fails
  operators:            # per-operator overrides of the two
    adaptive_max_pool3d_backward:
      threshold: 15%
      gate: fail
changes:                # `/test changed` (and `/test` alone): the operators the diff touches
  limit: 20             # more than this many operators run only with `--all`
  on_push: [nvidia]     # run them on these backends when a trusted author opens or pushes
  rules:                # a path glob → operators, for what the built-in rules cannot see
    - paths: ["src/flag_gems/runtime/backend/_thead/heuristics_config_utils.py"]
      operators: [mm, addmm]
failures:               # after a failing accuracy step, each failing test re-run by node id
  reruns: 4             # times on the head (a pass makes it flaky); once on the merge base
  budget_s: 120         # at most this long for all re-runs; what is left is unclassified
  max_tests: 20         # at most this many failing tests re-run; the rest are unclassified
  gate: [new]           # the classes that fail the check: new, already_failing, flaky,
                        # infrastructure (a failure left unclassified counts as new)
merge_queue:            # a merge queue's group (`merge_group`): what runs on its head
  run: changed          # changed: the operators its pull request changes; none (default):
                        # nothing, and the `ondemand` check says success at once
  backends: [nvidia]
```

The file is sections, each a strict model: an unknown key is a
problem. `parse_repo_config` never raises: it answers the configuration and the problems, each
with the line it is on; a file with any problem counts as absent (the defaults apply to all of
it), so what applies is always simple to say. Pure: pydantic and PyYAML, no I/O.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args, get_origin

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from workflows.changes import Rule

CONFIG_PATH = ".github/ondemand.yml"
MAX_CONFIG_BYTES = 64 * 1024
MAX_DEPTH = 20  # YAML nesting; a real file nests four deep
DEFAULT_THRESHOLD = 0.10
DEFAULT_CHANGED_LIMIT = 20
MAX_RULES = 200
MAX_SHOWN_CHARS = 40  # of a value quoted in a problem

Gate = Literal["inform", "fail"]
GATES: tuple[Gate, ...] = ("inform", "fail")
OP_NAME = r"[a-z_][a-z0-9_]{0,63}"
BACKEND_NAME = r"[a-z0-9][a-z0-9_-]{0,63}"
_PERCENT = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*%\s*$")
_THRESHOLD_HELP = "give a percentage above 0 and below 100, like 10%"
_NUMBER_TAGS = frozenset({"tag:yaml.org,2002:int", "tag:yaml.org,2002:float"})


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


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong with the file: its 1-based line and a plain-text message."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass(frozen=True)
class ConfigReading:
    """A parse: the configuration that applies (the defaults when there are problems) and the
    problems, by line."""

    config: RepoConfig
    problems: tuple[ConfigProblem, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


def parse_repo_config(text: str) -> ConfigReading:
    """Read `.github/ondemand.yml`'s text. Empty or only comments: the defaults, no problem.
    Any problem (over 64 KiB, not YAML, a value or key the schema refuses): the defaults, and
    every problem found, each on its line."""
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > MAX_CONFIG_BYTES:
        return too_large_reading(size)
    lines = max(1, text.count("\n") + (0 if text.endswith("\n") else 1))
    try:
        root, data = _load(text)
    except yaml.MarkedYAMLError as exc:
        return _failed(_yaml_problem(exc, lines))
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow
        line = min(text.count("\n", 0, exc.position) + 1, lines)
        message = f"not valid YAML: character #x{exc.character:04x} is not allowed"
        return _failed(ConfigProblem(line, message))
    except yaml.YAMLError as exc:
        return _failed(ConfigProblem(1, f"not valid YAML: {exc}"))
    if root is None or data is None:  # no document, or one that is empty (`---`, `~`)
        return ConfigReading(DEFAULTS)
    problems = list(_duplicate_keys(root))
    try:
        config = RepoConfig.model_validate(data)
    except ValidationError as exc:
        index: dict[int, _Entries] = {}
        problems += [_schema_problem(error, root, index) for error in exc.errors()]
    if problems:
        return ConfigReading(DEFAULTS, _ordered(problems))
    return ConfigReading(config)


def too_large_reading(size: int) -> ConfigReading:
    """The reading of a file of `size` bytes past MAX_CONFIG_BYTES, read or not (GitHub's
    contents API leaves out a file's content past 1 MB): the defaults, one problem on line 1."""
    message = f"the file is {size:,} bytes; at most {MAX_CONFIG_BYTES:,} (64 KiB) are read"
    return ConfigReading(DEFAULTS, (ConfigProblem(1, message),))


def _load(text: str) -> tuple[yaml.Node | None, object]:
    """The document's node tree (None when empty) and its plain Python value."""
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        return root, loader.construct_document(root) if root is not None else None
    finally:
        loader.dispose()


def _failed(problem: ConfigProblem) -> ConfigReading:
    return ConfigReading(DEFAULTS, (problem,))


def _ordered(problems: Sequence[ConfigProblem]) -> tuple[ConfigProblem, ...]:
    return tuple(sorted(dict.fromkeys(problems), key=lambda p: p.line))


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses aliases (`*name`: one line can expand into a great
    deal, and a settings file needs none) and nesting deeper than MAX_DEPTH (the composer
    recurses), each as a YAML error at its line."""

    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: object) -> yaml.Node:
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(
                None, None, "an alias (*name) is not allowed here: write the value out", mark
            )
        if self._depth >= MAX_DEPTH:
            mark = self.peek_event().start_mark
            raise yaml.composer.ComposerError(
                None, None, f"nested more than {MAX_DEPTH} deep", mark
            )
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _yaml_problem(exc: yaml.MarkedYAMLError, lines: int) -> ConfigProblem:
    mark = exc.problem_mark or exc.context_mark
    line = min(mark.line + 1, lines) if mark is not None else 1
    what = exc.problem or exc.context or "cannot be read"
    if exc.context and exc.problem:
        what = f"{exc.problem} ({exc.context})"
    return ConfigProblem(line, f"not valid YAML: {what}")


def _line(node: yaml.Node) -> int:
    return int(node.start_mark.line) + 1


def _key_text(node: yaml.Node) -> str:
    return str(node.value) if isinstance(node, yaml.ScalarNode) else _shown(node)


def _duplicate_keys(root: yaml.Node) -> Iterator[ConfigProblem]:
    """Keys given twice in one mapping: YAML keeps the last silently; say so instead."""
    stack: list[tuple[yaml.Node, str]] = [(root, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key, value in node.value:
                name = _key_text(key)
                where = f"{path}.{name}" if path else name
                if name in seen:
                    yield ConfigProblem(
                        _line(key), f"{where}: given twice (first on line {seen[name]})"
                    )
                else:
                    seen[name] = _line(key)
                stack.append((value, where))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, f"{path}[{i}]") for i, item in enumerate(node.value))


def _shown(node: yaml.Node | None) -> str:
    """A node as a problem quotes it: a scalar as written (clipped), else what kind it is."""
    if isinstance(node, yaml.MappingNode):
        return "a mapping"
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    if node is None or node.tag == "tag:yaml.org,2002:null":
        return "nothing"
    value = str(node.value)
    if len(value) > MAX_SHOWN_CHARS:
        value = value[: MAX_SHOWN_CHARS - 1] + "…"
    return json.dumps(value, ensure_ascii=False)


_Entries = dict[str, tuple[yaml.Node, yaml.Node]]


def _find(
    root: yaml.Node, loc: Sequence[int | str], index: dict[int, _Entries]
) -> tuple[yaml.Node | None, yaml.Node]:
    """The (key node, value node) a pydantic location names, as deep as the YAML goes;
    `index` keeps each mapping's entries by key once made (a file may have thousands)."""
    key: yaml.Node | None = None
    node = root
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            entries = index.get(id(node))
            if entries is None:  # the last of a key given twice is the one that counts
                entries = index[id(node)] = {_key_text(k): (k, v) for k, v in node.value}
            found = entries.get(str(part))
            if found is None:
                return key, node
            key, node = found
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if not 0 <= part < len(node.value):
                return key, node
            key, node = None, node.value[part]
        else:
            return key, node
    return key, node


def _model_at(loc: Sequence[int | str]) -> type[BaseModel] | None:
    """The section model that a location's mapping is validated as (None: not a model)."""
    model: type[BaseModel] | None = RepoConfig
    parts = list(loc)
    while parts and model is not None:
        field = model.model_fields.get(str(parts.pop(0)))
        if field is None:
            return None
        kind: Any = field.annotation
        while get_origin(kind) is Annotated:
            kind = get_args(kind)[0]
        if get_origin(kind) is list:
            if not parts or not isinstance(parts[0], int):
                return None
            parts.pop(0)
            kind = get_args(kind)[0]
        elif get_origin(kind) is dict:
            if not parts:
                return None
            parts.pop(0)
            kind = get_args(kind)[1]
            while get_origin(kind) is Annotated:
                kind = get_args(kind)[0]
        model = kind if isinstance(kind, type) and issubclass(kind, BaseModel) else None
    return model


def _known(model: type[BaseModel] | None) -> list[str]:
    return list(model.model_fields) if model is not None else []


def _schema_problem(
    error: ErrorDetails, root: yaml.Node, index: dict[int, _Entries]
) -> ConfigProblem:
    """One pydantic error as a line and a message in the file's own words."""
    loc = [p for p in error["loc"] if p != "[key]"]
    is_key = error["loc"][-1:] == ("[key]",)
    kind = error["type"]
    key, value = _find(root, loc, index)
    if is_key:  # a dict's key that is not a valid name: point at the key
        parent = ".".join(map(str, loc[:-1]))
        line = _line(key) if key is not None else _line(value)
        shown = _shown(key)
        return ConfigProblem(
            line,
            f"{parent}: {shown} is not an operator name: lowercase letters, digits and _, "
            "not starting with a digit, at most 64",
        )
    path = ".".join(map(str, loc))
    if kind in ("extra_forbidden", "invalid_key"):
        parent_loc = loc[:-1]
        known = _known(_model_at(parent_loc))
        name = _key_text(key) if key is not None else str(loc[-1])
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        where = ".".join(map(str, parent_loc)) or "the file"
        return ConfigProblem(
            _line(key) if key is not None else _line(value),
            f"{where}: unknown key {json.dumps(name, ensure_ascii=False)}; "
            f"{hint}known: {', '.join(known)}",
        )
    if kind == "missing":
        where = ".".join(map(str, loc[:-1])) or "the file"
        return ConfigProblem(_line(value), f"{where}: `{loc[-1]}` is missing")
    line = _line(value)
    shown = _shown(value)
    nothing = shown == "nothing"
    if kind == "threshold":
        numeric = isinstance(value, yaml.ScalarNode) and value.tag in _NUMBER_TAGS
        hint = " (a bare number is a fraction: 0.1 is 10%)" if numeric else ""
        return ConfigProblem(
            line,
            f"{path}: {'no value' if nothing else f'{shown} is not a threshold'}: "
            f"{_THRESHOLD_HELP}{hint}",
        )
    if kind == "literal_error" and loc[:2] == ["failures", "gate"]:
        return ConfigProblem(
            line,
            f"{path}: {'no value' if nothing else f'{shown} is not a failure class'}: "
            f"give {', '.join(FAILURE_GATES)}",
        )
    if kind == "literal_error" and loc[-1:] == ["gate"]:
        return ConfigProblem(
            line,
            f"{path}: {'no value' if nothing else f'{shown} is not a gate'}: "
            f"give {' or '.join(GATES)}",
        )
    if kind in ("model_type", "dict_type"):
        model = _model_at(loc)
        what = f"keys ({', '.join(_known(model))})" if model is not None else "names to settings"
        where = path or "the file"
        return ConfigProblem(line, f"{where}: expected a mapping of {what}, found {shown}")
    return ConfigProblem(line, f"{path or 'the file'}: {shown}: {error['msg']}")
