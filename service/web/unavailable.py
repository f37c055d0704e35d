"""The answer while the database is unreachable or busy: 503 with `Retry-After`, logged once
per outage (`service.db.outage`), instead of a 500 and a traceback per request. A request
whose transaction lost a conflict (a deadlock) gets a 503 asking for a retry in a second,
logged at info and no outage. Any other database error is a bug and is raised as one."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from fastapi import Request, Response
from fastapi.responses import JSONResponse

from service.db.outage import RETRY_AFTER_S, Outages, is_conflict, is_outage

log = logging.getLogger(__name__)
CONFLICT_RETRY_AFTER_S = 1

Handler = Callable[[Request, Exception], Awaitable[Response]]


def database_unavailable(outages: Outages) -> Handler:
    async def handler(request: Request, error: Exception) -> Response:
        if is_conflict(error):
            log.info("%s %s lost a conflict: answered 503", request.method, request.url.path)
            return JSONResponse(
                {"detail": "the request lost a conflict with another: try again"},
                status_code=503,
                headers={"Retry-After": str(CONFLICT_RETRY_AFTER_S)},
            )
        if not is_outage(error):
            raise error
        outages.failed(error, f"{request.method} {request.url.path}")
        return JSONResponse(
            {"detail": "the database is unreachable or busy: try again shortly"},
            status_code=503,
            headers={"Retry-After": str(RETRY_AFTER_S)},
        )

    return handler
