"""Turning a request into jobs: one target's job (`queue_target`), and the operators a change
touches, selected and queued with one reply that says what and why (`run_changed`). Shared by
the commands that start jobs and by the events that do (a trusted push)."""

from __future__ import annotations

import difflib
import logging
from dataclasses import dataclass, replace

from ondemand.git import GitError
from report.selection import (
    SelectionReply,
    render_capped,
    render_selection,
    render_selection_failed,
)
from report.views import JobView
from service.db.models import Job
from service.github.reads import FILES_CAP, PullInfo
from service.queue.jobs import NewJob
from service.receive.commands.words import Target
from service.receive.context import NO_CREDENTIALS, NoCredentials, Origin, Services
from service.render.replies import render_duplicate, render_unknown_operator, render_unknown_ref
from workflows.repo_config import ConfigReading

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Run:
    """How a target runs: with its benchmark, and compared with the merge base, or with a
    commit of its own (`against`: the ref as written and its SHA); `profile`: its changed rows
    profiled after the comparison (`/test profile`)."""

    bench: bool = True
    compare: bool = True
    against: tuple[str, str] | None = None
    profile: bool = False

    @classmethod
    def as_ran(cls, job: Job) -> Run:
        """How `job` ran, to run it again: against the same `vs REF` commit (else the merge
        base as it is now), with its benchmark, comparison and profile as they were."""
        exact = job.exact_base and job.base_sha
        against = (job.base_ref or "", job.base_sha) if exact else None
        return cls(job.bench, job.compare, against=against, profile=job.profile)


def queue_target(
    services: Services,
    origin: Origin,
    pull: PullInfo,
    sha: str,
    target: Target,
    run: Run,
    settings: ConfigReading,
) -> tuple[Job, bool]:
    """The job of `target`, created now or already queued or running; True when it is this
    request's: new, or made by this very comment processed again."""
    policy = settings.config.for_op(target.op)
    base_ref, base_sha = run.against or (pull.base_ref, pull.base_sha)
    job, new = services.jobs.create_job(
        NewJob(
            repo=origin.repo,
            clone_url=pull.clone_url or origin.clone_url,
            pr_number=origin.pr_number,
            sha=sha,
            op=target.op,
            backend=target.backend,
            bench=run.bench,
            compare=run.compare,
            exact_base=run.against is not None,
            profile=run.profile,
            base_ref=base_ref,
            base_sha=base_sha,
            requested_by=origin.login,
            command_comment_id=origin.comment_id,
            private=origin.private,
            threshold=policy.threshold,
            gate=policy.gate,
        )
    )
    again = origin.comment_id is not None and job.command_comment_id == origin.comment_id
    return job, new or again


def unknown_operator(
    services: Services, repo: str, sha: str, target: Target, new_op: bool
) -> str | None:
    """The answer for an operator the service knows is not there, or None to queue it:
    certain when a runner reported this very commit's operators; otherwise only for a near
    miss of a known operator (a typo), unless the command says the operator is new. Shared
    by the commands that name operators (`/test`, `/test profile`)."""
    operators = services.operators
    exact = operators.at(repo, sha)
    if exact is not None:
        if target.op in exact:
            return None
        close = difflib.get_close_matches(target.op, sorted(exact), n=3, cutoff=0.6)
        return render_unknown_operator(target.op, target.backend, close, sha)
    known = operators.of_repo(repo)
    if new_op or not known or target.op in known:
        return None
    close = difflib.get_close_matches(target.op, sorted(known), n=3, cutoff=0.8)
    if not close:
        return None  # perhaps new in this pull request: the runner will tell
    return render_unknown_operator(target.op, target.backend, close, None)


@dataclass(frozen=True)
class ChangedRequest:
    """Run the operators a change touches on `backends`; past the repository's limit only
    with `everything`."""

    backends: tuple[str, ...]
    everything: bool = False
    run: Run = Run()


def against_ref(services: Services, repo: str, run: Run, ref: str) -> Run | str:
    """`run` compared with the commit `ref` names (`vs REF`), or the answer that it names
    none."""
    base = services.github.commit_sha(repo, ref)
    if base is None:
        return render_unknown_ref(ref)
    return replace(run, against=(ref, base))


def queue_targets(
    services: Services,
    origin: Origin,
    pull: PullInfo,
    sha: str,
    targets: list[Target],
    run: Run,
    settings: ConfigReading,
    new_op: bool = False,
) -> tuple[list[str], int]:
    """Each of a command's targets queued with `run`: the answers for those not queued (an
    operator not there, a job already waiting) and how many jobs were made. Shared by the
    commands that name targets (`/test`, `/test profile`)."""
    answers: list[str] = []
    created = 0
    for target in targets:
        unknown = unknown_operator(services, origin.repo, sha, target, new_op)
        if unknown is not None:
            answers.append(unknown)
            continue
        job, mine = queue_target(services, origin, pull, sha, target, run, settings)
        if mine:
            created += 1
            continue
        answers.append(render_duplicate(target.op, target.backend, services.view(job)))
    return answers, created


def run_changed(
    services: Services,
    origin: Origin,
    request: ChangedRequest,
    pull: PullInfo,
    sha: str,
    settings: ConfigReading,
    who: str,
    quiet: bool = False,
) -> tuple[str, str]:
    """Select the operators the pull request changes at `sha` and queue one job per
    (operator, backend); the reply says what was chosen and why. `quiet` (a push whose pull
    request has no note yet): say nothing when no operator changed."""
    if services.selector is None:
        raise NoCredentials(NO_CREDENTIALS)
    changes = settings.config.changes
    try:
        report = services.selector.select(
            origin.repo, pull, sha, request.backends, changes.selection_rules()
        )
    except GitError as exc:
        log.warning("selection of %s#%s failed: %s", origin.repo, origin.pr_number, exc)
        return render_selection_failed(who, str(exc)), "selection failed"
    if report.capped or report.selection is None:
        text = render_capped(who, report.total, FILES_CAP, request.backends)
        return text, f"selection: {report.total} files, past GitHub's list"
    chosen = report.selection
    if not chosen.operators:
        services.head_idle(origin.repo, sha, "no operator changed")
        if quiet:
            return "", "selection: no operator changed"
    over = len(chosen.operators) > changes.limit and not request.everything
    queued: list[JobView] = []
    existing: list[JobView] = []
    if not over:
        for op in chosen.operators:
            for backend in request.backends:
                if op not in report.by_backend.get(backend, ()):
                    continue  # this backend's tests do not name it
                target = Target(op, backend)
                job, mine = queue_target(services, origin, pull, sha, target, request.run, settings)
                (queued if mine else existing).append(services.view(job))
    reply = SelectionReply(
        who=who,
        sha=sha,
        backends=request.backends,
        operators=chosen.operators,
        unmatched=chosen.unmatched,
        files=report.listed,
        limit=changes.limit,
        over_limit=over,
        queued=queued,
        existing=existing,
    )
    n_ops = len(chosen.operators)
    outcome = f"selection: {n_ops} operator(s), {len(queued)} job(s) queued"
    if over:
        outcome = f"selection: {n_ops} operator(s), past the limit of {changes.limit}"
    return render_selection(reply), outcome
