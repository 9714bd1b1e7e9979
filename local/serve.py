"""`postbag serve`: the production HTTP server (the submit app, `/v1` and `/app`).

It needs `POSTBAG_DATABASE_URL` and `POSTBAG_SECRET_KEY` (never an embedded PostgreSQL,
never a generated key), keeps webhooks off private addresses unless
`POSTBAG_ALLOW_PRIVATE_TARGETS` says otherwise, and runs no ticks: deliveries are the
business of `postbag worker`. With `--workers N`, uvicorn's supervisor starts N processes
accepting on one shared socket, and restarts one that dies. SIGTERM (or SIGINT) closes the
listening socket, lets requests in flight finish for up to GRACE_SECONDS, then exits.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn

from core.destinations.http import close_shared_client
from core.http.protocol import GuardedProtocol, prepare_serving
from core.platform.logs import configure_logging
from core.platform.services import Services
from core.platform.settings import production_settings
from core.schemas.checker import close_schema_checker
from local.runner import combined_app, settle_heap
from local.worker import positive

# Requests in flight at SIGTERM get this long to finish; keep it under the orchestrator's
# grace period (Docker's default is 10 s, Kubernetes' 30 s).
GRACE_SECONDS = 8
DEFAULT_PORT = 8080

Receive = Callable[[], Awaitable[Any]]
Send = Callable[[Any], Awaitable[None]]


def _logging(level: str) -> None:
    # JSON lines, without a line per request (as `postbag dev`).
    # JSON lines unless a person reads stderr (a container's is not a terminal).
    configure_logging(level, readable=sys.stderr.isatty())
    logging.getLogger("uvicorn.access").propagate = False


def create_app() -> Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]:
    """The ASGI app of one serving process, built from the environment (uvicorn calls this
    in each process it starts); the lifespan's shutdown closes the pool."""
    settings = production_settings()
    _logging(settings.log_level)
    services = Services.from_settings(settings)
    app = combined_app(services, local=False)

    async def serving(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await app(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                settle_heap()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await close_shared_client()
                await close_schema_checker()
                await services.db.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    return serving


def add_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`postbag serve [--host H] [--port P] [--workers N]`."""
    serve = commands.add_parser(
        "serve", help="the production HTTP server: submit, /v1 and /app (no ticks)"
    )
    serve.add_argument("--host", default="0.0.0.0")
    serve.add_argument(
        "--port",
        type=int,
        # Cloud Run (and others) say which port to listen on in PORT.
        default=int(os.environ.get("PORT") or DEFAULT_PORT),
        help=f"default: $PORT, or {DEFAULT_PORT}",
    )
    serve.add_argument(
        "--workers", type=positive, default=1, help="processes accepting on the port (default 1)"
    )


def main(args: argparse.Namespace) -> int:
    """Check the settings (a ConfigError names what is missing), then serve until SIGTERM."""
    settings = production_settings()
    _logging(settings.log_level)
    prepare_serving()
    # A single-process uvicorn raises the stopping signal again once it has shut down; a
    # graceful stop is a clean exit, so the signal then finds nothing left to do.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    uvicorn.run(
        "local.serve:create_app",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        loop="uvloop",
        http=GuardedProtocol,  # httptools with request deadlines and a connection cap
        lifespan="on",
        # Postbag decides itself whom to believe for X-Forwarded-For (POSTBAG_TRUSTED_PROXIES).
        proxy_headers=False,
        server_header=False,
        log_config=None,
        access_log=False,
        timeout_graceful_shutdown=GRACE_SECONDS,
    )
    return 0
