"""The tested repository's own settings, `.github/ondemand.yml`, read from the pull request's
base (never its head, so a pull request cannot loosen its own gate), or for the default
branch's own runs (`main:`) from the pushed commit.

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
main:                   # the default branch's own runs, with no pull request
  on_push: changed      # each push to it: none (default), changed (before..after) or all
  backends: [nvidia, mthreads]
  nightly: all          # every operator once a night; none (default): no schedule
  alerts: [comment, issue]  # a row slower beyond noise: a comment on the merged pull
                        # request, one issue per operator and backend (the default: both)
  drift_window: 8       # the drift test: a row's last N main runs, chained
```

The file is sections (`sections.py`, `main_section.py`), each a strict model: an unknown key
is a problem. `parse_repo_config` never raises: it answers the configuration and the problems,
each with the line it is on (`problems.py`); a file with any problem counts as absent (the
defaults apply to all of it), so what applies is always simple to say. Pure: pydantic and
PyYAML, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import yaml
from pydantic import ValidationError

from workflows.repo_config.main_section import (
    ALERTS,
    DEFAULT_WINDOW,
    NIGHTLY,
    ON_PUSH,
    Alert,
    MainSection,
    Nightly,
    OnPush,
)
from workflows.repo_config.problems import (
    MAX_DEPTH,
    MAX_SHOWN_CHARS,
    ConfigProblem,
    Entries,
    Loader,
    duplicate_keys,
    schema_problem,
    yaml_problem,
)
from workflows.repo_config.sections import (
    DEFAULT_CHANGED_LIMIT,
    DEFAULT_RERUN_BUDGET_S,
    DEFAULT_RERUN_TESTS,
    DEFAULT_RERUNS,
    DEFAULT_THRESHOLD,
    FAILURE_GATES,
    GATES,
    MAX_RULES,
    ChangesSection,
    ComparePolicy,
    CompareSection,
    FailureGate,
    FailuresSection,
    Gate,
    MergeQueueRun,
    MergeQueueSection,
    OperatorCompare,
    RepoConfig,
    RuleEntry,
    format_threshold,
)

__all__ = [
    "ALERTS", "CONFIG_PATH", "DEFAULTS", "DEFAULT_CHANGED_LIMIT", "DEFAULT_RERUNS",
    "DEFAULT_RERUN_BUDGET_S", "DEFAULT_RERUN_TESTS", "DEFAULT_THRESHOLD", "DEFAULT_WINDOW",
    "FAILURE_GATES", "GATES", "MAX_CONFIG_BYTES", "MAX_DEPTH", "MAX_RULES", "MAX_SHOWN_CHARS",
    "NIGHTLY", "ON_PUSH", "Alert", "ChangesSection", "ComparePolicy", "CompareSection",
    "ConfigProblem", "ConfigReading", "FailureGate", "FailuresSection", "Gate", "MainSection",
    "MergeQueueRun", "MergeQueueSection", "Nightly", "OnPush", "OperatorCompare", "RepoConfig",
    "RuleEntry", "format_threshold", "parse_repo_config", "too_large_reading",
]  # fmt: skip

CONFIG_PATH = ".github/ondemand.yml"
MAX_CONFIG_BYTES = 64 * 1024
DEFAULTS = RepoConfig()


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
        return _failed(yaml_problem(exc, lines))
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow
        line = min(text.count("\n", 0, exc.position) + 1, lines)
        message = f"not valid YAML: character #x{exc.character:04x} is not allowed"
        return _failed(ConfigProblem(line, message))
    except yaml.YAMLError as exc:
        return _failed(ConfigProblem(1, f"not valid YAML: {exc}"))
    if root is None or data is None:  # no document, or one that is empty (`---`, `~`)
        return ConfigReading(DEFAULTS)
    problems = list(duplicate_keys(root))
    try:
        config = RepoConfig.model_validate(data)
    except ValidationError as exc:
        index: dict[int, Entries] = {}
        problems += [schema_problem(error, root, index) for error in exc.errors()]
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
    loader = Loader(text)
    try:
        root = loader.get_single_node()
        return root, loader.construct_document(root) if root is not None else None
    finally:
        loader.dispose()


def _failed(problem: ConfigProblem) -> ConfigReading:
    return ConfigReading(DEFAULTS, (problem,))


def _ordered(problems: Sequence[ConfigProblem]) -> tuple[ConfigProblem, ...]:
    return tuple(sorted(dict.fromkeys(problems), key=lambda p: p.line))
