"""The production HTTP server of `postbag serve`: both apps in one, on uvicorn.

It runs no ticks: deliveries are the business of `postbag worker` (`core.ticks.worker`).
With `workers` above 1, uvicorn's supervisor starts that many processes accepting on one
shared socket, and restarts one that dies. SIGTERM (or SIGINT) closes the listening
socket, lets requests in flight finish for up to GRACE_SECONDS, then exits. `postbag dev`
serves the same combined app (with the local runner's pages) beside a worker.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn

from core.destinations.http import close_shared_client
from core.http.api_app import create_api_app
from core.http.metrics import create_metrics_app
from core.http.protocol import GuardedProtocol, prepare_serving
from core.http.submit_app import create_submit_app
from core.platform import metrics
from core.platform.logs import configure_logging
from core.platform.services import Services
from core.platform.settings import production_settings
from core.schemas.checker import close_schema_checker

Receive = Callable[[], Awaitable[Any]]
Send = Callable[[Any], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

API_PREFIXES = ("/v1", "/app", "/mcp")
METRICS_PATH = "/metrics"
# Requests in flight at SIGTERM get this long to finish; keep it under the orchestrator's
# grace period (Docker's default is 10 s, Kubernetes' 30 s).
GRACE_SECONDS = 8


def combined_app(services: Services, *, local: bool = True) -> ASGIApp:
    """One ASGI app: `/v1`, `/app` and `/mcp` go to the api app, `/metrics` to the metrics,
    everything else to submit (with the local runner's pages unless `local` is off, as
    under `postbag serve`)."""
    submit = create_submit_app(services, local=local)
    api = create_api_app(services)
    metrics = create_metrics_app(services)

    async def app(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        target: ASGIApp
        if path.startswith(API_PREFIXES):
            target = api
        elif path == METRICS_PATH:
            target = metrics
        else:
            target = submit
        await target(scope, receive, send)

    return app


# Allocations between two collections of the youngest generation (Python's default: 700).
# A request allocates thousands of short-lived objects, nearly all freed by reference
# counting: collecting every 700 of them cost about 5 % of a submit's CPU; every 20,000,
# about 3 % less CPU per submit and a lower p99, for a few MB at most.
YOUNG_COLLECTION_THRESHOLD = 20_000


def settle_heap() -> None:
    """Once a serving process is built: everything built so far (modules, apps, pool) lives
    as long as the process, so keep it out of the collector's scans (their full passes over
    it were the p99 of a submit), and collect the young generation less often."""
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, 20, 20)


def configure_server_logging(level: str) -> None:
    """JSON lines unless a person reads stderr (a container's is not a terminal), without a
    line per request (as `postbag dev`)."""
    configure_logging(level, readable=sys.stderr.isatty())
    logging.getLogger("uvicorn.access").propagate = False


def create_app() -> ASGIApp:
    """The ASGI app of one serving process, built from the environment (uvicorn calls this
    in each process it starts); the lifespan's shutdown closes the pool."""
    settings = production_settings()
    configure_server_logging(settings.log_level)
    services = Services.from_settings(settings)
    app = combined_app(services, local=False)

    async def serving(scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await app(scope, receive, send)
            return
        pool_metrics: asyncio.Task[None] | None = None
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                settle_heap()
                pool_metrics = asyncio.create_task(metrics.record_pool_while_serving(services.db))
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if pool_metrics is not None:
                    pool_metrics.cancel()
                metrics.process_stopped()
                await close_shared_client()
                await close_schema_checker()
                await services.db.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    return serving


def run_server(*, host: str, port: int, workers: int) -> None:
    """Serve on `host:port` with `workers` processes until SIGTERM or SIGINT."""
    # A single-process uvicorn raises the stopping signal again once it has shut down; a
    # graceful stop is a clean exit, so the signal then finds nothing left to do.
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: None)
    prepare_serving()
    shared = None
    if workers > 1 and not os.environ.get(metrics.MULTIPROCESS_DIRECTORY):
        # Each process keeps its metrics in files here; any of them answers for all.
        shared = tempfile.mkdtemp(prefix="postbag-metrics-")
        os.environ[metrics.MULTIPROCESS_DIRECTORY] = shared
    try:
        uvicorn.run(
            "core.http.server:create_app",
            factory=True,
            host=host,
            port=port,
            workers=workers,
            loop="uvloop",
            http=GuardedProtocol,  # httptools with request deadlines and a connection cap
            lifespan="on",
            # Postbag decides itself whom to believe for X-Forwarded-For
            # (POSTBAG_TRUSTED_PROXIES).
            proxy_headers=False,
            server_header=False,
            log_config=None,
            access_log=False,
            timeout_graceful_shutdown=GRACE_SECONDS,
        )
    finally:
        if shared is not None:
            shutil.rmtree(shared, ignore_errors=True)
