"""Trusted builds: after a job's verdict, the runner runs the same workflow on the job's base
commit, and what that compiles fills the repository's shared compile cache
(`runner.environment.compile_cache`), so the next job of the repository loads its unchanged kernels
instead of compiling them.

The base commit is the pull request's base (`base_sha`: a commit of the repository's own
branch, code its maintainers merged), never the pull request's head. The build is a job of
its own: a fresh checkout, HOME and private cache in the slot's directory, the jail, the
same steps; only its private cache is published, and only once per base commit.
`ondemand run` has no pull request: it trusts the commit it was asked to run (the caller's
own), unless `--base` names another. A job that compares with a commit a comment named
(`/test ... vs REF`, `options.exact_base`) builds nothing: GitHub resolves a SHA of any fork
in the repository's network, so that commit is not known to be the maintainers' code.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace
from pathlib import Path

from runner.job.execute import JobContext, execute
from workflows.models import JobOptions, JobResult, JobSpec
from workflows.spec import WorkflowSpec

_LOCK = threading.Lock()
_BUILDING: set[tuple[Path, str]] = set()


def trusted_commit(spec: JobSpec, *, local: bool = False) -> str | None:
    """The commit a trusted build of `spec`'s repository compiles, or None."""
    if spec.options.exact_base:
        return None
    if spec.base_sha:
        return spec.base_sha
    return spec.sha if local else None


def warm(
    spec: JobSpec, workflow: WorkflowSpec, ctx: JobContext, *, local: bool = False
) -> JobResult | None:
    """Build the trusted commit of `spec`'s repository into the shared compile cache, unless
    it is there already or the runner keeps no shared cache; its result, or None."""
    cache = ctx.compile_cache
    sha = trusted_commit(spec, local=local)
    if cache is None or sha is None or ctx.cancel.is_set():
        return None
    layer = cache.layer(spec.clone_url, spec.backend)
    with _LOCK:
        if cache.has_built(layer, sha) or (layer, sha) in _BUILDING:
            return None  # built, or another slot of this runner is building it now
        _BUILDING.add((layer, sha))
    try:
        return _build(spec, sha, workflow, ctx)
    finally:
        with _LOCK:
            _BUILDING.discard((layer, sha))


def _build(spec: JobSpec, sha: str, workflow: WorkflowSpec, ctx: JobContext) -> JobResult:
    build = spec.model_copy(
        update={
            "sha": sha,
            "base_sha": None,
            "base_ref": None,
            "options": JobOptions(bench=True, compare=False),  # every step a job may run
        }
    )
    started = time.monotonic()
    ctx.on_output(f"[ondemand] trusted build of {sha[:10]} for the compile cache\n".encode())
    # Its own job: nothing of it reaches the reported job's progress.
    quiet = replace(ctx, trusted=True, keep=False, on_progress=lambda _: None)
    result = execute(build, workflow, quiet)
    ctx.on_output(
        f"[ondemand] trusted build: {result.status.value} in "
        f"{time.monotonic() - started:.1f}s\n".encode()
    )
    return result
