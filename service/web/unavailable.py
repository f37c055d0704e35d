"""The answer while the database is unreachable or busy: 503 with `Retry-After`, logged once
per outage (`service.db.outage`), instead of a 500 and a traceback per request. Any other
database error is a bug and is raised as one."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from fastapi import Request, Response
from fastapi.responses import JSONResponse

from service.db.outage import RETRY_AFTER_S, Outages, is_outage

Handler = Callable[[Request, Exception], Awaitable[Response]]


def database_unavailable(outages: Outages) -> Handler:
    async def handler(request: Request, error: Exception) -> Response:
        if not is_outage(error):
            raise error
        outages.failed(error, f"{request.method} {request.url.path}")
        return JSONResponse(
            {"detail": "the database is unreachable or busy: try again shortly"},
            status_code=503,
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )

    return handler
