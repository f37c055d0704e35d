"""The runner API (docs/runner-protocol.md): register, health, claim (long-poll), heartbeat,
a job's open channel (long-poll: cancel at once), progress, logs by offset, artifacts
(`runner_api_artifacts`), complete. A runner
sees only jobs it holds: anything else is 404."""

# No `from __future__ import annotations`: the routes' annotations name the runner dependency
# built inside each route factory, which FastAPI can only see when they are evaluated there.

import asyncio
import hmac
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Body, Depends, HTTPException, Request, Response, status
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field, ValidationError
from starlette.concurrency import run_in_threadpool

from service.db.models import Runner
from service.github.client import GitHubError
from service.queue.artifacts import JobArtifacts
from service.queue.jobs import JobQueue, job_channel, job_spec
from service.queue.logs import JobLogs
from service.queue.runners import RunnerRegistry
from service.queue.wakeup import Wakeup
from service.settings import Settings
from service.web.runner_api_artifacts import artifacts_router
from workflows.models import JobResult, Progress, known_part

MAX_LOG_CHUNK = 1024 * 1024
TOKEN_RETRY_S = 2.0  # GitHub gave no read token for a private job: it is claimed again then
# (sooner when GitHub's client says when its pause for an outage or a rate limit ends)
log = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)


def _token_retry_s(exc: GitHubError) -> float:
    """When to claim a private job again after GitHub minted it no read token: once the
    client's pause ends (its next try of an outage, a rate limit's reset), at most
    `TOKEN_RETRY_S` away; a runner waiting on the claim gets the job as soon as GitHub can."""
    if exc.retry_after is None:
        return TOKEN_RETRY_S
    return min(TOKEN_RETRY_S, max(0.05, exc.retry_after))


RunnerJSON = Annotated[dict[str, Any], Body()]  # a runner's JSON, read by `_known`


class RegisterRequest(BaseModel):
    registration_token: str
    name: str = Field(min_length=1, max_length=200)
    backends: list[str] = Field(min_length=1)
    labels: list[str] = Field(default_factory=list)
    slots: int = Field(default=1, ge=1, le=64)
    version: str | None = None


class RegisterResponse(BaseModel):
    runner_id: int
    token: str


class DrainedJob(BaseModel):
    """One job whose infrastructure error drained its runner."""

    id: int
    step: str | None = Field(default=None, max_length=200)
    error: str | None = Field(default=None, max_length=2000)


class Drained(BaseModel):
    """A runner drained by its jobs' infrastructure errors: since when, and those jobs."""

    since: float
    jobs: list[DrainedJob] = Field(default_factory=list, max_length=100)


class HealthRequest(BaseModel):
    healthy: bool
    reason: str | None = None
    backends: list[str] | None = None
    drained: Drained | None = None


class ClaimRequest(BaseModel):
    wait_s: float = Field(default=0.0, ge=0, le=30)
    backends: list[str] | None = None
    # Jobs this runner handed back because it could not run them: another runner takes them.
    skip: list[int] = Field(default_factory=list, max_length=100)


class HeartbeatResponse(BaseModel):
    cancel: bool
    reason: str | None
    lease_expires_at: str


class EventsRequest(BaseModel):
    wait_s: float = Field(default=0.0, ge=0, le=30)


class EventsResponse(BaseModel):
    cancel: bool
    reason: str | None


class LogRequest(BaseModel):
    offset: int = Field(ge=0)
    data: str


class InterruptRequest(BaseModel):
    reason: str = Field(min_length=1, max_length=200)  # what stopped it: "stopped (SIGTERM)"


class RunnerInfo(BaseModel):
    """Who the service takes this runner for, and where its jobs fetch from."""

    runner_id: int
    name: str
    backends: list[str]
    repositories: list[str] = Field(description="clone URLs last tested on its backends")


class OffsetResponse(BaseModel):
    offset: int


def _not_held(job_id: int) -> HTTPException:
    return HTTPException(status.HTTP_404_NOT_FOUND, f"job {job_id} is not held by this runner")


def runner_auth(runners: RunnerRegistry) -> Callable[[Request], Runner]:
    """The runner API's authentication dependency over `runners`: made once per router, so a
    request that needs the runner twice reads its token once."""

    def current_runner(request: Request) -> Runner:
        """The runner named by the bearer token, or 401."""
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                "missing runner token: send Authorization: Bearer <token>",
                headers={"WWW-Authenticate": "Bearer"},
            )
        runner = runners.authenticate(token.strip())
        if runner is None:
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                "unknown runner token",
                headers={"WWW-Authenticate": "Bearer"},
            )
        return runner

    return current_runner


def canonical_backends(names: list[str], backend_names: Mapping[str, str]) -> list[str]:
    """The backends `names` stand for, each once in the order given, or 422 naming those the
    service does not know."""
    unknown = [n for n in names if n not in backend_names]
    if unknown:
        known = ", ".join(sorted(set(backend_names.values())))
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            f"unknown backend(s) {', '.join(unknown)}; known: {known}",
        )
    return list(dict.fromkeys(backend_names[n] for n in names))


def runner_api_router(
    *,
    settings: Settings,
    jobs: JobQueue,
    runners: RunnerRegistry,
    logs: JobLogs,
    wakeup: Wakeup,
    backend_names: Mapping[str, str],
    stopping: threading.Event,
    read_token: Callable[[str], str | None],
) -> APIRouter:
    """The runner API's routes over the queue's repositories; `read_token` mints what a
    runner fetches a private repository with."""
    current = runner_auth(runners)
    router = APIRouter(prefix="/api/v1")
    router.include_router(
        enrolment_router(
            settings=settings,
            jobs=jobs,
            runners=runners,
            backend_names=backend_names,
            current_runner=current,
        )
    )
    router.include_router(
        claim_router(
            settings=settings,
            jobs=jobs,
            wakeup=wakeup,
            backend_names=backend_names,
            stopping=stopping,
            read_token=read_token,
            current_runner=current,
        )
    )
    router.include_router(
        channel_router(
            settings=settings,
            jobs=jobs,
            wakeup=wakeup,
            stopping=stopping,
            current_runner=current,
        )
    )
    router.include_router(output_router(jobs=jobs, logs=logs, current_runner=current))
    artifacts = JobArtifacts(jobs.db)
    router.include_router(artifacts_router(artifacts=artifacts, current_runner=current))
    return router


def enrolment_router(
    *,
    settings: Settings,
    jobs: JobQueue,
    runners: RunnerRegistry,
    backend_names: Mapping[str, str],
    current_runner: Callable[[Request], Runner],
) -> APIRouter:
    """A runner's own routes: register, deregister, who it is taken for, its health."""
    router = APIRouter()
    RunnerDep = Annotated[Runner, Depends(current_runner)]

    @router.post("/runners/register", status_code=201, response_model=RegisterResponse)
    def register(body: RegisterRequest) -> RegisterResponse:
        tokens = settings.registration_tokens
        if not tokens:
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                "this service takes no registrations: its ONDEMAND_REGISTRATION_TOKENS is empty",
            )
        if not any(hmac.compare_digest(body.registration_token, t) for t in tokens):
            raise HTTPException(
                status.HTTP_401_UNAUTHORIZED,
                "bad registration token: it is none of the service's ONDEMAND_REGISTRATION_TOKENS",
            )
        backends = canonical_backends(body.backends, backend_names)
        runner_id, token = runners.register(
            body.name, backends, body.labels, body.slots, body.version
        )
        return RegisterResponse(runner_id=runner_id, token=token)

    @router.post("/runners/deregister", status_code=204)
    def deregister(runner: RunnerDep) -> Response:
        """The runner leaves (an ephemeral one after its job): its token stops working."""
        if not runners.deregister(runner.id):
            raise HTTPException(
                status.HTTP_409_CONFLICT,
                "this runner holds a running job: report it or hand it back first",
            )
        return Response(status_code=204)

    @router.get("/runners/me", response_model=RunnerInfo)
    def me(runner: RunnerDep) -> RunnerInfo:
        """The runner its token names (a runner's doctor: is the token still good?)."""
        return RunnerInfo(
            runner_id=runner.id,
            name=runner.name,
            backends=list(runner.backends),
            repositories=jobs.recent_repositories(list(runner.backends)),
        )

    @router.post("/runners/health", status_code=204)
    def health(body: HealthRequest, runner: RunnerDep) -> Response:
        backends = canonical_backends(body.backends, backend_names) if body.backends else None
        drained = body.drained.model_dump(mode="json") if body.drained else None
        runners.set_health(runner.id, body.healthy, body.reason, backends, drained)
        return Response(status_code=204)

    return router


def claim_router(
    *,
    settings: Settings,
    jobs: JobQueue,
    wakeup: Wakeup,
    backend_names: Mapping[str, str],
    stopping: threading.Event,
    read_token: Callable[[str], str | None],
    current_runner: Callable[[Request], Runner],
) -> APIRouter:
    """Taking a job (the long-poll claim) and giving back one not started."""
    router = APIRouter()
    RunnerDep = Annotated[Runner, Depends(current_runner)]

    @router.post("/jobs/claim", response_model=None)
    async def claim(body: ClaimRequest, request: Request, runner: RunnerDep) -> Response:
        """Long-poll: answer the moment a job for one of the runner's backends is queued."""
        backends = runner.backends
        if body.backends is not None:
            wanted = canonical_backends(body.backends, backend_names)
            backends = [b for b in wanted if b in runner.backends]
            if not backends:
                raise HTTPException(
                    status.HTTP_422_UNPROCESSABLE_CONTENT,
                    f"none of {', '.join(body.backends)} is served by this runner "
                    f"({', '.join(runner.backends)})",
                )
        deadline = time.monotonic() + min(body.wait_s, settings.max_claim_wait_s)
        while True:
            since = wakeup.snapshot(backends)
            job = await run_in_threadpool(jobs.claim, runner.id, backends, body.skip)
            if job is not None:
                token: str | None = None
                if job.private:
                    try:
                        token = await run_in_threadpool(read_token, job.repo)
                    except GitHubError as exc:
                        # Not the pull request's fault: the job waits in the queue again.
                        await run_in_threadpool(jobs.release, runner.id, job.id)
                        log.warning("job %s: no read token for %s: %s", job.id, job.repo, exc)
                        remaining = deadline - time.monotonic()
                        if remaining <= 0 or stopping.is_set():
                            return Response(status_code=204)
                        await asyncio.sleep(min(remaining, _token_retry_s(exc)))
                        continue
                if await request.is_disconnected():
                    await run_in_threadpool(jobs.release, runner.id, job.id)
                    return Response(status_code=204)
                spec = job_spec(job, jobs.lease_seconds, token)
                # A public job's claim reads as before: a runner that knows no token parses it.
                hidden = {"git_token"} if token is None else None
                return JSONResponse(spec.model_dump(mode="json", exclude=hidden))
            remaining = deadline - time.monotonic()
            if remaining <= 0 or stopping.is_set():
                return Response(status_code=204)
            await wakeup.wait(backends, since, remaining)

    @router.post("/jobs/{job_id}/release", status_code=204)
    def release(job_id: int, runner: RunnerDep) -> Response:
        """A runner gives back a job it claimed but will not start: it goes back to the queue
        as it was (no attempt spent). A job the runner already started cannot be given back."""
        if not jobs.release(runner.id, job_id):
            raise HTTPException(
                status.HTTP_409_CONFLICT, f"job {job_id} is not an unstarted claim of this runner"
            )
        return Response(status_code=204)

    return router


def channel_router(
    *,
    settings: Settings,
    jobs: JobQueue,
    wakeup: Wakeup,
    stopping: threading.Event,
    current_runner: Callable[[Request], Runner],
) -> APIRouter:
    """A held job's channel while it runs: the heartbeat, the open channel that hears a cancel
    at once, and its progress."""
    router = APIRouter()
    RunnerDep = Annotated[Runner, Depends(current_runner)]

    @router.post("/jobs/{job_id}/heartbeat", response_model=HeartbeatResponse)
    def heartbeat(job_id: int, runner: RunnerDep) -> HeartbeatResponse:
        beat = jobs.heartbeat(runner.id, job_id)
        if beat is None:
            raise _not_held(job_id)
        return HeartbeatResponse(
            cancel=beat.cancel,
            reason=beat.reason,
            lease_expires_at=beat.lease_expires_at.isoformat(),
        )

    @router.post("/jobs/{job_id}/events", response_model=EventsResponse)
    async def events(job_id: int, body: EventsRequest, runner: RunnerDep) -> EventsResponse:
        """The runner's open channel to a job it holds: answers the moment the job is to stop
        (cancelled, superseded), or after `wait_s` with nothing to do. A runner hears of a
        cancel within the time a wake-up takes, not at its next heartbeat."""
        keys = [job_channel(job_id)]
        deadline = time.monotonic() + min(body.wait_s, settings.max_claim_wait_s)
        while True:
            since = wakeup.snapshot(keys)
            state = await run_in_threadpool(jobs.cancel_state, runner.id, job_id)
            if state is None:
                raise _not_held(job_id)
            remaining = deadline - time.monotonic()
            if state.cancel or remaining <= 0 or stopping.is_set():
                return EventsResponse(cancel=state.cancel, reason=state.reason)
            await wakeup.wait(keys, since, remaining)

    @router.post("/jobs/{job_id}/progress", status_code=204)
    def progress(job_id: int, body: RunnerJSON, runner: RunnerDep) -> Response:
        """The job's progress now (step, tests done / total, failures so far); the service
        keeps the latest and shows it in the comment at its own pace."""
        if jobs.progress(runner.id, job_id, _known(Progress, body, job_id, "progress")) is None:
            raise _not_held(job_id)
        return Response(status_code=204)

    return router


def output_router(
    *, jobs: JobQueue, logs: JobLogs, current_runner: Callable[[Request], Runner]
) -> APIRouter:
    """What a held job leaves: its log by offset, and how it ended (interrupted by its runner,
    or its result)."""
    router = APIRouter()
    RunnerDep = Annotated[Runner, Depends(current_runner)]

    @router.post("/jobs/{job_id}/logs", response_model=OffsetResponse)
    def append_log(job_id: int, body: LogRequest, runner: RunnerDep) -> JSONResponse:
        data = body.data.encode()
        if len(data) > MAX_LOG_CHUNK:
            raise HTTPException(
                status.HTTP_413_CONTENT_TOO_LARGE, f"a log chunk is at most {MAX_LOG_CHUNK} bytes"
            )
        appended = logs.append(runner.id, job_id, body.offset, data)
        if appended is None:
            raise _not_held(job_id)
        if appended.full:
            detail = f"a job's log is at most {logs.max_bytes} bytes; the rest is refused"
            return JSONResponse(
                {"detail": detail, "offset": appended.offset, "limit": logs.max_bytes},
                status_code=status.HTTP_413_CONTENT_TOO_LARGE,
            )
        code = 200 if appended.accepted else 409
        return JSONResponse({"offset": appended.offset}, status_code=code)

    @router.post("/jobs/{job_id}/interrupt")
    def interrupt(job_id: int, body: InterruptRequest, runner: RunnerDep) -> dict[str, str]:
        """The runner stopped a job it started for its own reasons (it is shutting down):
        the job is requeued for another attempt, or errored after its last."""
        final = jobs.interrupt(runner.id, job_id, body.reason)
        if final is None:
            raise _not_held(job_id)
        return {"status": str(final)}

    @router.post("/jobs/{job_id}/complete")
    def complete(job_id: int, body: RunnerJSON, runner: RunnerDep) -> dict[str, str]:
        """The job's result (what a newer runner adds is left out: `_known`)."""
        result = _known(JobResult, body, job_id, "result")
        try:
            final = jobs.complete(runner.id, job_id, result)
        except ValueError as exc:
            raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from exc
        if final is None:
            raise _not_held(job_id)
        return {"status": str(final)}

    return router


def _known(model: type[M], body: dict[str, Any], job_id: int, what: str) -> M:
    """A runner's `body` as `model`. A newer runner's may hold fields this service does not
    know: they are left out and logged, never a refusal (runners are upgraded first); what is
    wrong in the rest is a 422 saying where and why."""
    try:
        value, unknown = known_part(model, body)
    except ValidationError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, json.loads(exc.json())) from exc
    if unknown:
        log.warning(
            "job %s: %s fields this service does not know left out: %s",
            job_id, what, ", ".join(sorted(unknown)),
        )  # fmt: skip
    return value
