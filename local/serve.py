"""`postbag serve`: the production HTTP server (the submit app, `/v1` and `/app`).

It needs `POSTBAG_DATABASE_URL` and `POSTBAG_SECRET_KEY` (never an embedded PostgreSQL,
never a generated key), keeps webhooks off private addresses unless
`POSTBAG_ALLOW_PRIVATE_TARGETS` says otherwise, and runs no ticks. The server itself is
production code, `core.http.server`; this module is its command.
"""

from __future__ import annotations

import argparse
import os

from core.platform.logs import log
from core.platform.settings import production_settings
from local.settings import listening_url
from local.worker import positive

DEFAULT_PORT = 8080
PUBLIC_URL = "POSTBAG_PUBLIC_URL"


def serving_port() -> int:
    """The port `postbag serve` listens on without `--port`: $PORT, else 8080."""
    return int(os.environ.get("PORT") or DEFAULT_PORT)


def links_base(public_url: str) -> tuple[str, str | None]:
    """Where the links a one-shot command prints (`create-org`'s owner link) start, and
    what to say when POSTBAG_PUBLIC_URL is unset: then, as `postbag serve` does, where it
    listens by default (its $PORT on this machine)."""
    if PUBLIC_URL in os.environ:
        return public_url.rstrip("/"), None
    url = listening_url("0.0.0.0", serving_port())
    return url, (
        f"{PUBLIC_URL} is unset: the link starts with {url}, where `postbag serve` listens "
        f"by default ($PORT, else {DEFAULT_PORT}); set {PUBLIC_URL} to the address people "
        "reach the dashboard at (as `postbag serve` has it) for links that work elsewhere"
    )


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
        default=serving_port(),
        help=f"default: $PORT, or {DEFAULT_PORT}",
    )
    serve.add_argument(
        "--workers", type=positive, default=1, help="processes accepting on the port (default 1)"
    )


def main(args: argparse.Namespace) -> int:
    """Check the settings (a ConfigError names what is missing), then serve until SIGTERM.

    Without POSTBAG_PUBLIC_URL, the links the server hands out (submit URLs, snippets, the
    dashboard's) use where it listens, and it says so once at start."""
    # Imported here: the apps are most of the CLI's start-up, which no other command needs.
    from core.http.server import configure_server_logging, run_server

    settings = production_settings()
    configure_server_logging(settings.log_level)
    if PUBLIC_URL not in os.environ:
        url = listening_url(args.host, args.port)
        # The serving processes (uvicorn starts them) read their settings from the environment.
        os.environ[PUBLIC_URL] = url
        log.warning(
            f"{PUBLIC_URL} is unset: submit URLs, snippets and links use {url}, where this "
            "server listens; set it to the address visitors reach",
            extra={"detail": {"public_url": url}},
        )
    run_server(host=args.host, port=args.port, workers=args.workers)
    return 0
