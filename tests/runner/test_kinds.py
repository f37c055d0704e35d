"""The step kinds behind one interface: every kind a workflow may name has its runner, the job
is the context they are given, and they reach the job through that context alone."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from runner.job import kinds
from runner.job.execute import _Job
from runner.job.kinds import KINDS, benchmark
from runner.job.kinds.benchmark import (
    compare_in_process,
    compare_processes,
    compare_workers,
    measure,
)
from runner.job.kinds.context import MergeBase, StepContext, Tree
from tests.runner.jobs import job_context
from workflows.models import BenchmarkResult, JobSpec
from workflows.spec import Compare, Step, StepKind, load_workflows


def _spec(tmp_path: Path, **kw: object) -> JobSpec:
    return JobSpec.model_validate(
        {
            "id": 1,
            "repo": "o/r",
            "clone_url": str(tmp_path / "origin"),
            "pr_number": 7,
            "sha": "a" * 40,
            "op": "good_op",
            "backend": "cpu",
            **kw,
        }
    )


def test_every_step_kind_has_a_runner() -> None:
    assert set(KINDS) == set(StepKind)


def test_the_job_is_the_context_its_steps_are_given(tmp_path: Path) -> None:
    job = _Job(_spec(tmp_path), load_workflows()["cpu"], job_context(tmp_path))
    assert isinstance(job, StepContext)


def test_the_kinds_never_import_the_job() -> None:
    imported = set()
    for path in Path(kinds.__file__).parent.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                imported.add(node.module)
            elif isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
    assert "runner.job.kinds.context" in imported
    assert not {name for name in imported if name.startswith("runner.job.execute")}


class _BenchmarkJob:
    """Just what the benchmark step reads of its job, with a merge base or none."""

    def __init__(self, spec: JobSpec, base: MergeBase | None) -> None:
        self.spec, self.base, self.benchmark = spec, base, None

    def base_tree(self, step: Step) -> MergeBase | None:
        return self.base

    def take_head_start(self, step: Step) -> None:
        return None  # nothing started ahead: tests/runner/test_bench_workers.py's


@pytest.mark.parametrize(
    ("compare", "base", "gives", "tried"),
    [
        ({"argv": ["x", "{base}"]}, True, {"in_process": True}, ["in_process"]),
        ({"argv": ["x", "{base}"]}, True, {}, ["in_process", "processes"]),
        ({"workers": True}, True, {"workers": True}, ["workers"]),
        ({"workers": True}, True, {}, ["workers", "processes"]),
        ({}, True, {}, ["processes"]),
        ({"argv": ["x", "{base}"]}, False, {}, ["plain"]),
        ({"workers": True}, False, {}, ["alone"]),  # nothing to compare: rounds alone
    ],
)
def test_the_benchmark_step_compares_the_first_way_that_can(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    compare: dict[str, Any],
    base: bool,
    gives: dict[str, bool],
    tried: list[str],
) -> None:
    """The step's own way (one process, or workers) first; separate processes where it
    cannot or the step names none; the plain run where there is no merge base (the worker
    alone in rounds for a step that compares in workers)."""
    calls: list[str] = []

    def way(name: str, always: bool = False) -> Any:
        def run(*_: object) -> BenchmarkResult | None:
            calls.append(name)
            return BenchmarkResult(op=name) if always or gives.get(name) else None

        return run

    monkeypatch.setattr(compare_in_process, "compare", way("in_process"))
    monkeypatch.setattr(compare_workers, "compare", way("workers"))
    monkeypatch.setattr(compare_processes, "compare", way("processes", always=True))
    monkeypatch.setattr(measure, "plain", way("plain", always=True))
    monkeypatch.setattr(compare_workers, "alone", way("alone", always=True))
    settings = Compare.model_validate(compare)
    step = Step(name="benchmark", kind=StepKind.benchmark, argv=["x"], compare=settings)
    merge_base = MergeBase("b" * 40, tmp_path / "base") if base else None
    job = _BenchmarkJob(_spec(tmp_path), merge_base)
    benchmark.run(step, job, Tree(tmp_path, Path("python"), {}))  # type: ignore[arg-type]
    assert calls == tried
    assert job.benchmark is not None and job.benchmark.op == tried[-1]
    assert job.benchmark.merge_base == (merge_base.sha if merge_base else None)
