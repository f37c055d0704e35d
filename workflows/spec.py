"""The workflow of one backend: what a job on it runs, loaded from `workflows/<backend>.yaml`.

A workflow is data, not code: argv templates whose placeholders (`{op}`, `{artifacts}`,
`{python}`, `{workspace}`) are substituted into single argv elements, never into a shell string.

A workflow's `steps` serve the default repository layout (this project's: `tests/kernels`
marked by operator, `python -m kernels.benchmark`); `layouts` maps another layout's name
(e.g. `flaggems`) to its own steps, chosen by `runner.job.layouts.detect` from the checkout.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from enum import StrEnum
from pathlib import Path

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from workflows.device import Device

WORKFLOWS_DIR = Path(__file__).resolve().parent
FLAGGEMS = "flaggems"  # the layout of a FlagGems-style repository (`src/flag_gems/`)
PLACEHOLDERS = frozenset(
    {"op", "artifacts", "python", "workspace", "sha", "backend", "op_tests", "xdist"}
    | {"base", "budget_s", "target"}  # a comparison's: the merge base's checkout, its limits
)
# Placeholders that stand for several argv elements: each must be a whole element.
# {op_tests}: the test files that can hold the operator's tests (the layout decides).
# {xdist}: `-n N`, pytest-xdist's workers for the slot, or nothing where it would not help.
LIST_PLACEHOLDERS = frozenset({"op_tests", "xdist"})
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


class WorkflowError(ValueError):
    """A workflow file that cannot be used: says the file, the field and why."""


class StepKind(StrEnum):
    accuracy = "accuracy"  # pytest with a JUnit XML report at {artifacts}/junit.xml
    benchmark = "benchmark"  # the benchmark harness writing JSON at {artifacts}/benchmark.json
    command = "command"  # anything else; only its exit status counts


class BenchmarkFormat(StrEnum):
    kernels = "kernels.benchmark/v1"  # one JSON document (docs/benchmark-json.md)
    flaggems = "flaggems.record"  # FlagGems `--record log`: lines of `[INFO] {json}`


DEFAULT_RESULTS = {
    StepKind.accuracy: "{artifacts}/junit.xml",
    StepKind.benchmark: "{artifacts}/benchmark.json",
}


class ProofLog(BaseModel):
    """Log lines that prove which implementation ran, as a vendor specialization logs them
    (`KERNELS_MTHREADS <OP> path=<kernel>`): the accuracy step counts the records of `logger`
    and its children whose message starts with `prefix`, and the report shows the counts."""

    model_config = ConfigDict(extra="forbid")

    prefix: str = Field(min_length=1, max_length=100)
    logger: str = Field(default="", max_length=200, description="a logger name; '' is the root")
    specialization: list[str] = Field(
        default_factory=list,
        max_length=8,
        description="paths in the checkout, `{op}` for the operator, where the vendor's "
        "specialization of an operator lives: where one exists and no line was logged, the "
        "report warns that the tests and timings are not of it",
    )

    @field_validator("specialization")
    @classmethod
    def _relative_paths(cls, paths: list[str]) -> list[str]:
        for path in paths:
            unknown = set(_PLACEHOLDER.findall(path)) - {"op"}
            if unknown:
                raise ValueError(f"{path!r}: only {{op}} may stand in a specialization's path")
            parts = Path(path).parts
            if not path or Path(path).is_absolute() or ".." in parts:
                raise ValueError(f"{path!r}: a path inside the checkout")
        return paths

    def specialization_of(self, tree: Path, op: str) -> str | None:
        """The first of `specialization` that exists in `tree` for `op`. The tree is the pull
        request's: only whether the name exists is read, and a link counts as itself."""
        for template in self.specialization:
            path = template.replace("{op}", op)
            if os.path.lexists(tree / path):
                return path
        return None


def _check_placeholders(argv: list[str]) -> list[str]:
    for arg in argv:
        for name in _PLACEHOLDER.findall(arg):
            if name not in PLACEHOLDERS:
                raise ValueError(
                    f"unknown placeholder {{{name}}} in {arg!r}; "
                    f"known: {', '.join(sorted(PLACEHOLDERS))}"
                )
            if name in LIST_PLACEHOLDERS and arg != f"{{{name}}}":
                raise ValueError(f"{{{name}}} stands for several arguments: alone in {arg!r}")
    return argv


class Compare(BaseModel):
    """How a benchmark step compares the pull request with its merge base: in rounds that time
    both in turn, until every row's change is known within `target` either side or `budget_s`
    is spent. With `argv`, one run times both trees itself (`{base}`: the merge base's
    checkout, `{budget_s}`, `{target}`); it exits 2 or 3 where it cannot (an older harness, a
    tree it cannot load), and the rounds then alternate processes of each tree, as they always
    do without `argv` (ABBA: each round's order the reverse of the last). With `workers`, each
    tree's process stays alive and times round after round when asked (a pytest harness
    timed with `triton.testing.do_bench`: runner/job/kinds/benchmark/bench_workers.py); a
    host-bound row's host time is then also judged over `host_processes` processes per tree."""

    model_config = ConfigDict(extra="forbid")

    argv: list[str] | None = Field(default=None, min_length=1)
    budget_s: float = Field(default=60.0, gt=0, le=3600)
    target: float = Field(default=0.025, gt=0, lt=1)
    max_rounds: int = Field(default=12, ge=1, le=100, description="rounds at most")
    verdict_s: float | None = Field(
        default=None,
        gt=0,
        le=7200,
        description="the job's time to its verdict that the rounds the runner schedules "
        "(processes, workers) aim within: where the steps before them (accuracy, start-up) "
        "leave less than `budget_s` of it, the rounds past the six a verdict needs stop at "
        "it; those six may still run to 1.5 × `budget_s` (an `argv` harness keeps `budget_s`)",
    )
    workers: bool = Field(
        default=False,
        description="without `argv`: keep one process per tree and interleave rounds in it "
        "(a pytest harness; its timer is the runner's), instead of a process per round",
    )
    host_processes: int = Field(
        default=3,
        ge=1,
        le=10,
        description="with `workers`: the processes per tree whose host time per call judges a "
        "host-bound row (processes as samples: two processes of one tree differ in host time "
        "for their whole lives); the worker and this many less one more, started with it and "
        "timed after the rounds; 1: a host change is shown, never judged",
    )
    host_rounds: int = Field(
        default=1,
        ge=1,
        le=20,
        description="the rounds each further host process times (host time needs far fewer "
        "than device time: each process is one sample)",
    )
    host_budget_s: float = Field(
        default=30.0,
        gt=0,
        le=600,
        description="the time the further host processes' rounds may take, after the rounds; "
        "`verdict_s` keeps it for them",
    )

    @field_validator("argv")
    @classmethod
    def _known_placeholders(cls, argv: list[str] | None) -> list[str] | None:
        return None if argv is None else _check_placeholders(argv)


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    kind: StepKind = StepKind.command
    argv: list[str] = Field(min_length=1)
    timeout_s: int = Field(default=1800, gt=0)
    results: str | None = Field(
        default=None,
        description="where the step writes its results (a template; a glob for flaggems.record, "
        "relative to the checkout); default by kind: {artifacts}/junit.xml, "
        "{artifacts}/benchmark.json",
    )
    format: BenchmarkFormat = BenchmarkFormat.kernels
    proof: ProofLog | None = None
    compare: Compare = Field(default_factory=Compare)

    @model_validator(mode="after")
    def _proof_on_accuracy(self) -> Step:
        if self.proof is not None and self.kind is not StepKind.accuracy:
            raise ValueError(f"step {self.name!r}: proof counts log lines of an accuracy step")
        return self

    @field_validator("argv")
    @classmethod
    def _known_placeholders(cls, argv: list[str]) -> list[str]:
        return _check_placeholders(argv)

    def render(
        self, values: Mapping[str, str], lists: Mapping[str, Sequence[str]] | None = None
    ) -> list[str]:
        """The argv with placeholders substituted; each element stays one element, but for a
        list placeholder, which becomes its list (never joined, never split)."""
        argv: list[str] = []
        for arg in self.argv:
            name = arg[1:-1]
            if name in LIST_PLACEHOLDERS and arg == f"{{{name}}}":
                argv += list((lists or {}).get(name, ()))
            else:
                argv.append(_render(arg, values))
        return argv

    def results_path(self, values: Mapping[str, str]) -> str | None:
        """The rendered location of the step's results (None for a plain command)."""
        template = self.results or DEFAULT_RESULTS.get(self.kind)
        return None if template is None else _render(template, values)


def _render(template: str, values: Mapping[str, str]) -> str:
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)


class PythonEnv(BaseModel):
    """What the job's Python environment adds on top of the host's packages (torch, the
    vendor plugin): the repository's own requirements and these extras of its pyproject."""

    model_config = ConfigDict(extra="forbid")

    extras: list[str] = Field(default_factory=lambda: ["test"])
    requirements_files: list[str] = Field(
        default_factory=lambda: ["requirements.txt", "requirements-test.txt"]
    )
    strict: bool = Field(
        default=False,
        description="a pin the host's version does not meet installs the pinned version "
        "(default: the host's version is used, and the report notes it)",
    )
    host_modules: list[str] = Field(
        default_factory=lambda: ["torch", "triton"],
        description="what the job's Python must import from the host (the vendor's stack): a "
        "runner not told which Python to use takes the first it finds that has them all",
    )

    @field_validator("host_modules")
    @classmethod
    def _module_names(cls, names: list[str]) -> list[str]:
        for name in names:
            if not re.match(r"^[A-Za-z_][A-Za-z0-9_.]*$", name):
                raise ValueError(f"not a module name: {name!r}")
        return names


class WorkflowSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str
    description: str = ""
    aliases: list[str] = Field(default_factory=list)
    labels: list[str] = Field(default_factory=list)
    vendor: str
    visible_devices_var: str | None = None
    device_check: list[str] = Field(default_factory=list, description="argv; exit 0 = usable")
    device: Device = Field(
        default_factory=Device, description="the vendor's device stack beside torch and triton"
    )
    env: dict[str, str] = Field(default_factory=dict)
    python_env: PythonEnv = Field(default_factory=PythonEnv)
    steps: list[Step] = Field(min_length=1)
    layouts: dict[str, list[Step]] = Field(
        default_factory=dict, description="steps for another repository layout, by its name"
    )

    @model_validator(mode="after")
    def _unique_steps(self) -> WorkflowSpec:
        for layout, steps in [("steps", self.steps), *self.layouts.items()]:
            names = [step.name for step in steps]
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"{layout}: step names must be unique; repeated: {dupes}")
            if not steps:
                raise ValueError(f"{layout}: a layout needs at least one step")
        return self

    def steps_for(self, layout: str | None) -> list[Step]:
        """The steps for a repository layout; the default steps when it has none of its own."""
        if layout and layout in self.layouts:
            return self.layouts[layout]
        return self.steps

    @field_validator("name")
    @classmethod
    def _valid_name(cls, name: str) -> str:
        if not _NAME.match(name):
            raise ValueError("a backend name is lowercase letters, digits, '_' or '-'")
        return name


# libyaml's safe loader where PyYAML has it: a tenth of the pure-Python one's time, paid by
# every service and runner start and every job that reads the workflows.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_workflow(path: Path) -> WorkflowSpec:
    """Load and validate one workflow file; errors name the file, the field and why."""
    try:
        data = yaml.load(path.read_text(), Loader=_SAFE_LOADER)
    except (OSError, yaml.YAMLError) as exc:
        raise WorkflowError(f"{path}: cannot read: {exc}") from exc
    if not isinstance(data, dict):
        raise WorkflowError(f"{path}: expected a mapping at the top level")
    try:
        spec = WorkflowSpec.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(top)'}: {err['msg']}"
            for err in exc.errors()
        )
        raise WorkflowError(f"{path}: {problems}") from exc
    if spec.name != path.stem:
        raise WorkflowError(f"{path}: name: {spec.name!r} must match the file name {path.stem!r}")
    return spec


def load_workflows(directory: Path = WORKFLOWS_DIR) -> dict[str, WorkflowSpec]:
    """All workflows of a directory by backend name; aliases must not collide."""
    specs: dict[str, WorkflowSpec] = {}
    seen: dict[str, str] = {}
    for path in sorted(directory.glob("*.yaml")):
        spec = load_workflow(path)
        for key in (spec.name, *spec.aliases):
            if key in seen:
                raise WorkflowError(f"{path}: aliases: {key!r} is already used by {seen[key]!r}")
            seen[key] = spec.name
        specs[spec.name] = spec
    return specs


def backend_names(specs: Mapping[str, WorkflowSpec]) -> dict[str, str]:
    """Every accepted backend spelling (name or alias) to its backend name."""
    names: dict[str, str] = {}
    for spec in specs.values():
        names[spec.name] = spec.name
        for alias in spec.aliases:
            names[alias] = spec.name
    return names
