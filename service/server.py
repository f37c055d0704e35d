"""`ondemand serve`: the service under uvicorn. On SIGTERM or SIGINT, runners' waiting claims
are answered at once (uvicorn waits for open requests before it stops, and a long-poll claim
would hold it for up to half a minute)."""

from __future__ import annotations

import gc
import logging
import shutil
import sys
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING

import uvicorn
from alembic.util.exc import CommandError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from ondemand.options import Number, OneLineParser
from service.settings import Settings, read_settings, settings_source

if TYPE_CHECKING:
    from fastapi import FastAPI

# An idle connection is kept longer than a proxy keeps its own idle ones (60 s for nginx and
# most load balancers), so the proxy closes it, never the service: a request the proxy sends
# on a connection the service is just closing (uvicorn's default is 5 s) fails as a 502.
KEEP_ALIVE_S = 75


class Server(uvicorn.Server):
    """uvicorn's server, calling `on_exit` the moment a signal asks it to stop."""

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self.on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.on_exit()
        super().handle_exit(sig, frame)


def serve_parser() -> OneLineParser:
    """`ondemand serve`'s options."""
    parser = OneLineParser(
        prog="ondemand serve",
        description="Run the service: webhook, runner API, job pages. "
        "Configured by ONDEMAND_* environment variables (see the README).",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument(
        "--port", type=Number(int, 0, maximum=65535), default=8000, help="port to listen on"
    )
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning"])
    parser.add_argument(
        "--local-trial",
        action="store_true",
        help="a trial on this machine: start without a webhook secret or GitHub credentials "
        "(also ONDEMAND_LOCAL_TRIAL=1)",
    )
    return parser


def main(argv: list[str]) -> int:
    args = serve_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s")
    # Alembic speaks at info when imported and for each revision; the service says what changed.
    logging.getLogger("alembic").setLevel(max(logging.WARNING, logging.getLogger().level))
    # Every setting is checked before anything starts: each problem one line, exit 2 (the
    # unit does not restart a configuration it refuses).
    settings, problems = read_settings()
    for problem in problems:
        print(f"ondemand serve: {problem.line}", file=sys.stderr)
    if settings is None or problems:
        return 2
    missing = settings.missing_for_service()
    if missing and not (args.local_trial or settings.local_trial):
        for item in missing:
            print(
                f"ondemand serve: refusing to start without {item} (docs/deploy.md; or "
                "--local-trial, ONDEMAND_LOCAL_TRIAL=1, to try it here without)",
                file=sys.stderr,
            )
        return 2
    database = make_url(settings.database_url).render_as_string(hide_password=True)
    app = _app(settings, database)
    if app is None:
        return 2
    trial = " · local trial" if missing else ""
    print(
        f"ondemand serve: http://{args.host}:{args.port} (public URL {settings.public_url}) · "
        f"database {database} · {settings_source()}{trial}",
        flush=True,
    )
    _warn(settings, app, local_trial=bool(missing))
    # What start-up built (the ORM, the app, the workflows) lives as long as the process: out of
    # the collector's sight, a full collection takes milliseconds instead of a 100 ms pause in
    # every request under way.
    gc.collect()
    gc.freeze()
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        timeout_keep_alive=KEEP_ALIVE_S,
    )
    Server(config, app.state.service.begin_shutdown).run()
    return 0


def _app(settings: Settings, database: str) -> FastAPI | None:
    """The service's app, or None when it cannot start (a line on stderr says why: a setting
    the workflows refuse, a database that does not answer, or one a newer version migrated);
    `database` is its URL as shown."""
    from service.app import create_app

    try:
        return create_app(settings)
    except ValueError as exc:
        print(f"ondemand serve: {exc}", file=sys.stderr)
    except SQLAlchemyError as exc:
        first = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        print(
            f"ondemand serve: the database {database} does not answer: {first}\nCheck "
            "ONDEMAND_DATABASE_URL, and that the database server runs and takes connections "
            "from this host (`ondemand doctor service` checks it).",
            file=sys.stderr,
        )
    except CommandError as exc:  # a schema this version does not know: a newer one migrated it
        print(
            f"ondemand serve: the database {database}: {exc}. A newer version migrated it: "
            "run that version, or restore the backup taken before it.",
            file=sys.stderr,
        )
    return None


def _warn(settings: Settings, app: FastAPI, *, local_trial: bool) -> None:
    """What a deployment has wrong but can start with: said once, with the setting to change (a
    local trial chose to go without; it is told nothing); and a missing git."""
    from service.doctor import config_findings

    for finding in [] if local_trial else config_findings(settings, app.state.service.workflows):
        if finding.level != "ok":
            print(f"ondemand serve: {finding.check}: {finding.detail} → {finding.fix}",
                  file=sys.stderr, flush=True)  # fmt: skip
    if shutil.which("git") is None:
        print(
            "ondemand serve: no git on PATH: `/test changed` will answer that it cannot read "
            "the pull request's tree (install git)",
            file=sys.stderr,
            flush=True,
        )
