"""Where a settings file goes wrong, in its own words: YAML read with its lines kept (no
aliases, bounded nesting), keys given twice, and each schema error turned into a line and a
message that names the key, the value and what it takes. Pure: PyYAML and pydantic's errors."""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, get_args, get_origin

import yaml
from pydantic import BaseModel
from pydantic_core import ErrorDetails

from workflows.repo_config.main_section import SECTION_ERROR, choices_problem
from workflows.repo_config.sections import FAILURE_GATES, GATES, RepoConfig

MAX_DEPTH = 20  # YAML nesting; a real file nests four deep
MAX_SHOWN_CHARS = 40  # of a value quoted in a problem
THRESHOLD_HELP = "give a percentage above 0 and below 100, like 10%"
NUMBER_TAGS = frozenset({"tag:yaml.org,2002:int", "tag:yaml.org,2002:float"})


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong with the file: its 1-based line and a plain-text message."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


class Loader(yaml.SafeLoader):
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


def yaml_problem(exc: yaml.MarkedYAMLError, lines: int) -> ConfigProblem:
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


def duplicate_keys(root: yaml.Node) -> Iterator[ConfigProblem]:
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


Entries = dict[str, tuple[yaml.Node, yaml.Node]]


def _find(
    root: yaml.Node, loc: Sequence[int | str], index: dict[int, Entries]
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


def schema_problem(
    error: ErrorDetails, root: yaml.Node, index: dict[int, Entries]
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
        numeric = isinstance(value, yaml.ScalarNode) and value.tag in NUMBER_TAGS
        hint = " (a bare number is a fraction: 0.1 is 10%)" if numeric else ""
        return ConfigProblem(
            line,
            f"{path}: {'no value' if nothing else f'{shown} is not a threshold'}: "
            f"{THRESHOLD_HELP}{hint}",
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
    if kind == "literal_error" and loc[:1] == ["main"] and len(loc) > 1:
        said = choices_problem(path, str(loc[1]), shown)
        if said is not None:
            return ConfigProblem(line, said)
    if kind == SECTION_ERROR:  # a section's own rule across its keys, at the section's key
        at = _line(key) if key is not None else line
        return ConfigProblem(at, f"{path or 'the file'}: {error['msg']}")
    if kind in ("model_type", "dict_type"):
        model = _model_at(loc)
        what = f"keys ({', '.join(_known(model))})" if model is not None else "names to settings"
        where = path or "the file"
        return ConfigProblem(line, f"{where}: expected a mapping of {what}, found {shown}")
    return ConfigProblem(line, f"{path or 'the file'}: {shown}: {error['msg']}")
