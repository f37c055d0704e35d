"""A command step: any argv a workflow runs for its exit status alone (0 passes, anything
else fails the job)."""

from __future__ import annotations

from runner.job.kinds.context import StepContext, Tree, interrupted, step_result
from workflows.models import StepStatus
from workflows.spec import Step


def run(step: Step, job: StepContext, tree: Tree) -> None:
    """Run the command and record whether it exited 0."""
    outcome, _ = job.run(step, tree, job.artifacts)
    interrupted(job, step.name, outcome, step.timeout_s)
    ok = outcome.exit_code == 0
    status = StepStatus.succeeded if ok else StepStatus.failed
    message = None if ok else f"exited {outcome.exit_code}"
    job.record(step_result(step.name, outcome, status, message))
