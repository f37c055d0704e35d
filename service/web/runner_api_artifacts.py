"""The runner API's artifacts route (docs/runner-protocol.md): a held job's files, such as a
profile's traces, uploaded gzip as the request's body, one file a request."""

# No `from __future__ import annotations`: the route's annotations name the runner dependency
# built inside the factory, which FastAPI can only see when they are evaluated there.
from collections.abc import Callable
from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Request, Response, status

from service.db.models import Runner
from service.queue.artifacts import (
    GZIP_MAGIC,
    MAX_ARTIFACT_BYTES,
    MAX_ARTIFACTS,
    MAX_JOB_ARTIFACT_BYTES,
    JobArtifacts,
    Stored,
    valid_name,
)


def artifacts_router(
    *, artifacts: JobArtifacts, current_runner: Callable[[Request], Runner]
) -> APIRouter:
    """`PUT /jobs/{job_id}/artifacts/{name}`: store a held job's artifact."""
    router = APIRouter()
    RunnerDep = Annotated[Runner, Depends(current_runner)]

    @router.put("/jobs/{job_id}/artifacts/{name}", status_code=204)
    async def upload(job_id: int, name: str, request: Request, runner: RunnerDep) -> Response:
        if not valid_name(name):
            raise HTTPException(
                status.HTTP_422_UNPROCESSABLE_CONTENT,
                "an artifact's name is 1-128 letters, digits and `._-`, not starting with "
                "one of `._-` and without `..`",
            )
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > MAX_ARTIFACT_BYTES:
            raise _too_large()
        data = bytearray()
        async for piece in request.stream():
            data += piece
            if len(data) > MAX_ARTIFACT_BYTES:
                raise _too_large()
        if not data.startswith(GZIP_MAGIC):
            raise HTTPException(
                status.HTTP_415_UNSUPPORTED_MEDIA_TYPE, "an artifact is uploaded gzip"
            )
        stored = artifacts.put(runner.id, job_id, name, bytes(data))
        if stored is Stored.not_held:
            raise HTTPException(
                status.HTTP_404_NOT_FOUND, f"job {job_id} is not held by this runner"
            )
        if stored is Stored.too_large:
            raise _too_large()
        return Response(status_code=204)

    return router


def _too_large() -> HTTPException:
    return HTTPException(
        status.HTTP_413_CONTENT_TOO_LARGE,
        f"an artifact is at most {MAX_ARTIFACT_BYTES} bytes gzip, a job's at most "
        f"{MAX_JOB_ARTIFACT_BYTES} bytes in {MAX_ARTIFACTS} files",
    )
