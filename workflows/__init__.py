"""Per-backend workflows (the YAML files beside this module) and the typed models that carry a
job and its result between the service and the runner."""

from workflows.models import (
    AccuracyResult,
    BenchmarkResult,
    BenchmarkRow,
    EnvironmentInfo,
    JobOptions,
    JobResult,
    JobSpec,
    JobStatus,
    SkipGroup,
    StepResult,
    StepStatus,
    TestFailure,
)
from workflows.spec import Step, WorkflowError, WorkflowSpec, load_workflow, load_workflows

__all__ = [
    "AccuracyResult",
    "BenchmarkResult",
    "BenchmarkRow",
    "EnvironmentInfo",
    "JobOptions",
    "JobResult",
    "JobSpec",
    "JobStatus",
    "SkipGroup",
    "Step",
    "StepResult",
    "StepStatus",
    "TestFailure",
    "WorkflowError",
    "WorkflowSpec",
    "load_workflow",
    "load_workflows",
]
