"""What wraps every REST call (not the admin API, the pages, nor git): injected faults, GitHub's
rate-limit and request-id headers, and the call log."""

from __future__ import annotations

import time
import uuid
from collections.abc import Awaitable, Callable

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from sandbox.auth import peek_login
from sandbox.git_http import is_git
from sandbox.pages import is_page
from sandbox.state import Fault, SandboxState

ADMIN_PREFIX = "/_sandbox"
DOCS = "https://docs.github.com/rest"
PRIMARY_RATE_MESSAGE = "API rate limit exceeded for user ID {uid}."
SECONDARY_RATE_MESSAGE = (
    "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
)
SERVER_MESSAGES = {500: "Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}


def rate_headers(state: SandboxState, used: int, exhausted: bool = False) -> dict[str, str]:
    remaining = 0 if exhausted else max(0, state.rate_limit - used)
    return {
        "X-RateLimit-Limit": str(state.rate_limit),
        "X-RateLimit-Remaining": str(remaining),
        "X-RateLimit-Reset": str(state.rate_reset),
        "X-RateLimit-Used": str(state.rate_limit if exhausted else used),
        "X-RateLimit-Resource": "core",
    }


def error_response(status: int, message: str, headers: dict[str, str]) -> JSONResponse:
    """An error as GitHub's REST API words it."""
    body = {"message": message, "documentation_url": DOCS, "status": str(status)}
    return JSONResponse(body, status_code=status, headers=headers)


def exhausted_response(state: SandboxState, uid: int) -> JSONResponse:
    """GitHub's answer to a call past the hour's primary limit: 403, no requests left, the
    window's reset."""
    headers = rate_headers(state, 0, exhausted=True)
    return error_response(403, PRIMARY_RATE_MESSAGE.format(uid=uid), headers)


def fault_response(state: SandboxState, fault: Fault, used: int, uid: int) -> JSONResponse:
    """GitHub's answer for an injected fault: a 5xx; a primary (403) or secondary (429) rate
    limit with `X-RateLimit-Remaining: 0` and, when asked, `Retry-After`; or a secondary limit
    as GitHub often sends it (403 `kind: secondary`): requests remaining, no `Retry-After`, the
    limit named only in the message."""
    headers: dict[str, str] = {}
    if fault.status == 403 and fault.kind == "secondary":
        headers.update(rate_headers(state, used))
        message = SECONDARY_RATE_MESSAGE
    elif fault.status in (403, 429):
        headers.update(rate_headers(state, used, exhausted=fault.status == 403))
        if fault.status == 403:
            reset = int(time.time()) + (fault.retry_after if fault.retry_after is not None else 60)
            headers["X-RateLimit-Reset"] = str(reset)
        message = (
            PRIMARY_RATE_MESSAGE.format(uid=uid) if fault.status == 403 else SECONDARY_RATE_MESSAGE
        )
    else:
        headers.update(rate_headers(state, used))
        message = SERVER_MESSAGES.get(fault.status, "Server Error")
    if fault.retry_after is not None:
        headers["Retry-After"] = str(fault.retry_after)
    return error_response(fault.status, message, headers)


async def github_middleware(
    request: Request, call_next: Callable[[Request], Awaitable[Response]]
) -> Response:
    path = request.url.path
    if path.startswith(ADMIN_PREFIX) or is_page(path) or is_git(path):
        return await call_next(request)
    state: SandboxState = request.app.state.sandbox
    header = request.headers.get("authorization")
    login = await run_in_threadpool(peek_login, state, header)
    used = state.spend_rate(login)
    fault = state.take_fault(request.method, path)
    if fault is not None:
        if fault.applied:
            await call_next(request)  # the write happens; the caller hears only the fault
        user = state.users.get(login or "")
        response: Response = fault_response(state, fault, used, user.id if user else 0)
    elif state.rate_enforced and login is not None and used > state.rate_limit:
        user = state.users.get(login)
        response = exhausted_response(state, user.id if user else 0)
    else:
        response = await call_next(request)
        for key, value in rate_headers(state, used).items():
            response.headers.setdefault(key, value)
    response.headers["X-GitHub-Request-Id"] = uuid.uuid4().hex[:16].upper()
    response.headers["X-GitHub-Media-Type"] = "github.v3; format=json"
    response.headers["X-GitHub-Api-Version-Selected"] = "2022-11-28"
    state.record_call(request.method, path, response.status_code, login)
    return response
