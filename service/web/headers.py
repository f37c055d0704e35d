"""Headers every answer carries: no content sniffing, no framing, no referrer (job links of
private repositories carry their key), and a content security policy that lets a page load
only what the service itself serves."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; "
        "frame-ancestors 'none'"
    ),
}


class SecurityHeaders:
    """ASGI middleware adding `HEADERS` to every HTTP answer that does not set them itself.
    Plain ASGI rather than `@app.middleware("http")`: that wraps each request in a task and a
    stream, which costs the webhook a good part of its time under a burst."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._raw = [(k.lower().encode(), v.encode()) for k, v in HEADERS.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                headers.extend((k, v) for k, v in self._raw if k not in present)
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_headers)
