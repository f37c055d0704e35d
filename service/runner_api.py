"""The runner API (docs/runner-protocol.md): register, health, claim (long-poll), heartbeat,
logs by offset, complete. A runner sees only jobs it holds: anything else is 404."""

from __future__ import annotations

import hmac
import time
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request, Response, status
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool

from service.context import Context, get_context
from service.models import Runner
from service.store import job_spec
from workflows.models import JobResult

MAX_LOG_CHUNK = 1024 * 1024

router = APIRouter(prefix="/api/v1")


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


class HealthRequest(BaseModel):
    healthy: bool
    reason: str | None = None
    backends: list[str] | None = None


class ClaimRequest(BaseModel):
    wait_s: float = Field(default=0.0, ge=0, le=30)
    backends: list[str] | None = None


class HeartbeatResponse(BaseModel):
    cancel: bool
    reason: str | None
    lease_expires_at: str


class LogRequest(BaseModel):
    offset: int = Field(ge=0)
    data: str


class OffsetResponse(BaseModel):
    offset: int


Ctx = Annotated[Context, Depends(get_context)]


def current_runner(request: Request, ctx: Ctx) -> Runner:
    """The runner named by the bearer token, or 401."""
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "missing runner token: send Authorization: Bearer <token>",
            headers={"WWW-Authenticate": "Bearer"},
        )
    runner = ctx.store.authenticate(token.strip())
    if runner is None:
        raise HTTPException(
            status.HTTP_401_UNAUTHORIZED,
            "unknown runner token",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return runner


RunnerDep = Annotated[Runner, Depends(current_runner)]


def _canonical_backends(ctx: Context, names: list[str]) -> list[str]:
    unknown = [n for n in names if n not in ctx.backend_names]
    if unknown:
        raise HTTPException(
            status.HTTP_422_UNPROCESSABLE_CONTENT,
            f"unknown backend(s) {', '.join(unknown)}; known: {', '.join(sorted(ctx.workflows))}",
        )
    return list(dict.fromkeys(ctx.backend_names[n] for n in names))


def _not_held(job_id: int) -> HTTPException:
    return HTTPException(status.HTTP_404_NOT_FOUND, f"job {job_id} is not held by this runner")


@router.post("/runners/register", status_code=201, response_model=RegisterResponse)
def register(body: RegisterRequest, ctx: Ctx) -> RegisterResponse:
    tokens = ctx.settings.registration_tokens
    if not any(hmac.compare_digest(body.registration_token, t) for t in tokens):
        raise HTTPException(status.HTTP_401_UNAUTHORIZED, "bad registration token")
    backends = _canonical_backends(ctx, body.backends)
    runner_id, token = ctx.store.register_runner(
        body.name, backends, body.labels, body.slots, body.version
    )
    return RegisterResponse(runner_id=runner_id, token=token)


@router.post("/runners/health", status_code=204)
def health(body: HealthRequest, runner: RunnerDep, ctx: Ctx) -> Response:
    backends = _canonical_backends(ctx, body.backends) if body.backends else None
    ctx.store.set_health(runner.id, body.healthy, body.reason, backends)
    return Response(status_code=204)


@router.post("/jobs/claim", response_model=None)
async def claim(
    body: ClaimRequest, request: Request, runner: RunnerDep, ctx: Ctx
) -> Response | JSONResponse:
    """Long-poll: answer the moment a job for one of the runner's backends is queued."""
    backends = runner.backends
    if body.backends is not None:
        wanted = _canonical_backends(ctx, body.backends)
        backends = [b for b in wanted if b in runner.backends]
        if not backends:
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT,
                f"none of {', '.join(body.backends)} is served by this runner "
                f"({', '.join(runner.backends)})",
            )
    deadline = time.monotonic() + min(body.wait_s, ctx.settings.max_claim_wait_s)
    while True:
        since = ctx.wakeup.snapshot(backends)
        job = await run_in_threadpool(ctx.store.claim, runner.id, backends)
        if job is not None:
            if await request.is_disconnected():
                await run_in_threadpool(ctx.store.release, runner.id, job.id)
                return Response(status_code=204)
            spec = job_spec(job, ctx.store.lease_seconds)
            return JSONResponse(spec.model_dump(mode="json"))
        remaining = deadline - time.monotonic()
        if remaining <= 0 or ctx.stopping.is_set():
            return Response(status_code=204)
        await ctx.wakeup.wait(backends, since, remaining)


@router.post("/jobs/{job_id}/heartbeat", response_model=HeartbeatResponse)
def heartbeat(job_id: int, runner: RunnerDep, ctx: Ctx) -> HeartbeatResponse:
    beat = ctx.store.heartbeat(runner.id, job_id)
    if beat is None:
        raise _not_held(job_id)
    return HeartbeatResponse(
        cancel=beat.cancel, reason=beat.reason, lease_expires_at=beat.lease_expires_at.isoformat()
    )


@router.post("/jobs/{job_id}/logs", response_model=OffsetResponse)
def logs(job_id: int, body: LogRequest, runner: RunnerDep, ctx: Ctx) -> JSONResponse:
    data = body.data.encode()
    if len(data) > MAX_LOG_CHUNK:
        raise HTTPException(
            status.HTTP_413_CONTENT_TOO_LARGE, f"a log chunk is at most {MAX_LOG_CHUNK} bytes"
        )
    appended = ctx.store.append_log(runner.id, job_id, body.offset, data)
    if appended is None:
        raise _not_held(job_id)
    code = 200 if appended.accepted else 409
    return JSONResponse({"offset": appended.offset}, status_code=code)


@router.post("/jobs/{job_id}/complete")
def complete(job_id: int, result: JobResult, runner: RunnerDep, ctx: Ctx) -> dict[str, str]:
    try:
        final = ctx.store.complete(runner.id, job_id, result)
    except ValueError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from exc
    if final is None:
        raise _not_held(job_id)
    return {"status": str(final)}
