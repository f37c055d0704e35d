"""One default TLS context for every HTTP client a test process makes.

httpx builds a new `ssl.SSLContext` for each client, loading certifi's whole CA bundle
(30-60 ms of CPU), and the tests make hundreds of clients: each `httpx.get` and `httpx.post`
is a client of its own, and so is each client the service, the sandbox and their helpers open
in-process. The tests speak plain HTTP on loopback, where the context is never used, so the
default one (verify on, no client certificate; the CA files SSL_CERT_FILE or SSL_CERT_DIR
name, where set) is built once a process and handed to every client that asks for it; any
other is built as before.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Callable
from typing import Any

_shared: dict[tuple[str | None, str | None], ssl.SSLContext] = {}  # by the CA variables


def share_default_context() -> None:
    """Make httpx's transports take the one default context; nothing where httpx is absent or
    builds its contexts elsewhere."""
    try:
        from httpx._transports import default
    except ImportError:
        return
    build = getattr(default, "create_ssl_context", None)
    if build is None or getattr(build, "shared", False):
        return
    default.create_ssl_context = _shared_default(build)  # type: ignore[attr-defined]


def _shared_default(build: Callable[..., ssl.SSLContext]) -> Callable[..., ssl.SSLContext]:
    def create(verify: Any = True, cert: Any = None, trust_env: bool = True) -> ssl.SSLContext:
        if verify is not True or cert is not None:
            return build(verify=verify, cert=cert, trust_env=trust_env)
        env = os.environ if trust_env else {}
        key = (env.get("SSL_CERT_FILE"), env.get("SSL_CERT_DIR"))
        if key not in _shared:
            _shared[key] = build(verify=verify, cert=cert, trust_env=trust_env)
        return _shared[key]

    create.shared = True  # type: ignore[attr-defined]
    return create
