"""A job's commit status (with a token) and check run (as a GitHub App): their state, from the
job's status and the gates' decision, and their text, from the report."""

from __future__ import annotations

from report.comment import facts, progress_section, render_comment
from report.gate import failures_fail_gate, gate_failed, regression_accepted
from report.limits import LEVELS
from report.markdown import clip, one_line
from report.summary import headline, summary
from report.views import CheckRunUpdate, JobView, StatusUpdate
from workflows.models import JobStatus

MAX_STATUS_DESCRIPTION = 140


STATUS_STATE = {
    JobStatus.queued: "pending",
    JobStatus.running: "pending",
    JobStatus.succeeded: "success",
    JobStatus.failed: "failure",
    JobStatus.errored: "error",
    JobStatus.timed_out: "error",
    # Commit statuses know no "cancelled": a job stopped before its verdict says nothing
    # about the code, so it is neither a failure nor a success; the description says why.
    JobStatus.cancelled: "pending",
    JobStatus.superseded: "pending",
}


def render_status(view: JobView) -> StatusUpdate:
    """The commit status of a job: context `ondemand/<op>:<backend>`, target the job page."""
    unknown = view.result is not None and view.result.unknown_op and view.status.final
    state = "error" if unknown else STATUS_STATE[view.status]
    if view.status is JobStatus.failed and not unknown and not failures_fail_gate(view):
        state = "success"  # as an accepted regression: nothing the repository gates on
    if gate_failed(view):
        state = "failure"
    return StatusUpdate(
        state=state,
        description=one_line(summary(view), MAX_STATUS_DESCRIPTION),
        context=f"ondemand/{view.op}:{view.backend}",
        target_url=view.job_url,
    )


CHECK_CONCLUSION = {
    JobStatus.succeeded: "success",
    JobStatus.failed: "failure",
    JobStatus.errored: "failure",
    JobStatus.timed_out: "timed_out",
    JobStatus.cancelled: "cancelled",  # grey, not red: nothing was said about the code
    JobStatus.superseded: "neutral",
}
MAX_CHECK_TITLE = 200
MAX_CHECK_OUTPUT = 65535  # GitHub's limit on a check run's summary and on its text


def check_state(view: JobView) -> tuple[str, str | None]:
    """A job's check run: its status (`queued`, `in_progress`, `completed`) and, once
    completed, its conclusion; a cancel or a supersede is `cancelled` / `neutral`."""
    if view.status is JobStatus.queued:
        return "queued", None
    if view.status is JobStatus.running:
        return "in_progress", None
    conclusion = CHECK_CONCLUSION[view.status]
    if view.status is JobStatus.failed and not failures_fail_gate(view):
        conclusion = "neutral"  # failures of classes the repository does not gate on
    if gate_failed(view):
        conclusion = "failure"
    elif regression_accepted(view):
        conclusion = "neutral"
    return "completed", conclusion


def render_check(view: JobView) -> CheckRunUpdate:
    """The check run of a job when the service is a GitHub App: named like the commit
    status, its output the report (the headline and facts as the summary, the whole report
    with its table as the text)."""
    status, conclusion = check_state(view)
    report = render_comment(view)
    body = report.split("\n", 1)[1].lstrip("\n")  # without the hidden marker
    summary_parts = [f"### {headline(view)}", facts(view)]
    if view.status is JobStatus.running:
        summary_parts.append(progress_section(view, LEVELS[1]))
    return CheckRunUpdate(
        name=f"ondemand/{view.op}:{view.backend}",
        head_sha=view.sha,
        external_id=str(view.id),
        details_url=view.job_url,
        status=status,
        conclusion=conclusion,
        title=one_line(summary(view), MAX_CHECK_TITLE),
        summary=clip("\n\n".join(p for p in summary_parts if p), MAX_CHECK_OUTPUT),
        text=clip(body, MAX_CHECK_OUTPUT),
    )
