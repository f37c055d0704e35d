"""`create_app`: the sandbox as one FastAPI app (GitHub's REST subset + the admin API)."""

from __future__ import annotations

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from sandbox import admin_api, admin_merge, git_http, github_api, issues_api, pages
from sandbox.middleware import DOCS, github_middleware
from sandbox.state import SandboxError, SandboxState
from sandbox.webhooks import Deliverer


def _error(
    status: int, message: str, headers: dict[str, str] | None = None, **extra: object
) -> JSONResponse:
    return JSONResponse(
        {"message": message, "documentation_url": DOCS, "status": str(status), **extra},
        status_code=status,
        headers=headers,
    )


def create_app(
    state: SandboxState | None = None,
    *,
    webhook_url: str | None = None,
    webhook_secret: str | None = None,
) -> FastAPI:
    """A sandbox over `state` (a fresh one by default), delivering webhooks to `webhook_url`."""
    state = state or SandboxState()
    if webhook_url:
        state.set_webhook(webhook_url, webhook_secret)
    app = FastAPI(
        title="ondemand GitHub sandbox",
        docs_url="/_sandbox/docs",
        redoc_url=None,
        openapi_url="/_sandbox/openapi.json",
    )
    app.state.sandbox = state
    app.state.deliverer = Deliverer(state)

    @app.exception_handler(SandboxError)
    async def sandbox_error(_: Request, exc: SandboxError) -> JSONResponse:
        return _error(exc.status, exc.message, exc.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        errors = [
            {"field": ".".join(str(p) for p in e.get("loc", ())), "message": e.get("msg")}
            for e in exc.errors()
        ]
        return _error(422, "Validation Failed", errors=errors)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, "Not Found" if exc.status_code == 404 else str(exc.detail))

    app.middleware("http")(github_middleware)
    app.include_router(pages.router)
    app.include_router(admin_api.router)
    app.include_router(admin_merge.router)
    app.include_router(github_api.router)
    app.include_router(issues_api.router)
    app.include_router(git_http.router)
    return app
