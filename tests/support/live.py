"""Run an ASGI app under a real uvicorn server on a free loopback port, in a thread."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def live_server(app: Any, port: int | None = None) -> Iterator[str]:
    """Serve `app` on 127.0.0.1 until the block ends; yields the base URL."""
    port = port or free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        # As `ondemand serve` does on SIGTERM: open long-polls (claims, a job's channel) are
        # answered now, else uvicorn waits for them while the app's workers go on running.
        service = getattr(getattr(app, "state", None), "service", None)
        if service is not None:
            service.begin_shutdown()
        server.should_exit = True
        thread.join(timeout=15)
