"""`ondemand sandbox`: serve the GitHub sandbox under uvicorn."""

from __future__ import annotations

import argparse
import os
import sys

import uvicorn

from sandbox.app import create_app


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="ondemand sandbox",
        description="A local GitHub-compatible server (REST subset, admin API under /_sandbox/, "
        "signed webhooks) for demos and tests.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8081, help="port (default 8081)")
    parser.add_argument("--webhook-url", default=None, help="deliver webhooks to this URL")
    parser.add_argument(
        "--webhook-secret",
        default=os.environ.get("SANDBOX_WEBHOOK_SECRET"),
        help="sign deliveries with this secret (default: $SANDBOX_WEBHOOK_SECRET)",
    )
    parser.add_argument("--log-level", default="info", help="uvicorn log level")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        parser.error("--port must be between 1 and 65535")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else list(argv))
    app = create_app(webhook_url=args.webhook_url, webhook_secret=args.webhook_secret)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0
