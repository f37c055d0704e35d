"""Run an ASGI app under a real uvicorn server on a free loopback port, in a thread."""

from __future__ import annotations

import asyncio
import contextlib
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


class _Server(uvicorn.Server):
    """uvicorn's server, stopped as soon as asked: its own loop looks for `should_exit` every
    0.1 s, and the suite stops a few hundred servers (two a service test)."""

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        await super().startup(sockets)

    async def main_loop(self) -> None:
        counter = 0
        while not await self.on_tick(counter):  # the ticks keep the Date header current
            counter = (counter + 1) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stop.wait(), 0.1)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn's shutdown without its fixed 0.1 s pause: connections asked to close are
        looked at every 5 ms (open ones are cancelled after 15 s), then the app's lifespan
        ends."""
        for server in self.servers:
            server.close()
        for connection in list(self.server_state.connections):
            connection.shutdown()
        deadline = time.monotonic() + 15
        while self.server_state.connections or self.server_state.tasks:
            if time.monotonic() > deadline:
                for task in self.server_state.tasks:
                    task.cancel()
                break
            await asyncio.sleep(0.005)
        for server in self.servers:
            await server.wait_closed()
        await self.lifespan.shutdown()

    def stop(self) -> None:
        self.should_exit = True
        loop = getattr(self, "_loop", None)
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._stop.set)


@contextmanager
def live_server(app: Any, port: int | None = None) -> Iterator[str]:
    """Serve `app` on 127.0.0.1 until the block ends; yields the base URL."""
    port = port or free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = _Server(config)
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
        server.stop()
        thread.join(timeout=15)
