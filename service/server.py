"""`ondemand serve`: the service under uvicorn."""

from __future__ import annotations

import argparse
import logging
import sys

import uvicorn
from pydantic import ValidationError

from service.settings import Settings


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="ondemand serve",
        description="Run the service: webhook, runner API, job pages. "
        "Configured by ONDEMAND_* environment variables (see the README).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=8000, help="port to listen on")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning"])
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    try:
        settings = Settings()
    except ValidationError as exc:
        print(f"ondemand serve: bad settings:\n{exc}", file=sys.stderr)
        return 2
    from service.app import create_app

    try:
        app = create_app(settings)
    except ValueError as exc:
        print(f"ondemand serve: {exc}", file=sys.stderr)
        return 2
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0
