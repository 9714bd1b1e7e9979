"""`postbag dev`: uvicorn serving both apps, plus the worker loop of `postbag worker`."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import replace
from typing import Any

import uvicorn

from core.destinations.http import close_shared_client
from core.http.api_app import create_api_app
from core.http.protocol import GuardedProtocol, prepare_serving
from core.http.submit_app import create_submit_app
from core.platform.services import Services
from core.schemas.checker import close_schema_checker
from core.ticks.registry import worker_name
from local.worker import Worker, worker_services

ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]

API_PREFIXES = ("/v1", "/app", "/mcp")


def combined_app(services: Services, *, local: bool = True) -> ASGIApp:
    """One ASGI app: `/v1`, `/app` and `/mcp` go to the api app, everything else to submit
    (with the local runner's pages unless `local` is off, as under `postbag serve`)."""
    submit = create_submit_app(services, local=local)
    api = create_api_app(services)

    async def app(
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[Any], Awaitable[None]],
    ) -> None:
        path = scope.get("path", "")
        target = api if path.startswith(API_PREFIXES) else submit
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


async def serve(services: Services, *, host: str, port: int, ticks: bool = True) -> None:
    """Serve HTTP (and run the ticks, unless `ticks` is off) until SIGINT/SIGTERM, then
    stop the worker as `postbag worker` stops and close the pools.

    The worker has a pool of its own: sends and their outcome writes never wait for a
    connection behind requests, nor requests behind them.
    """
    worker = None
    if ticks:
        worker = Worker(worker_services(services), name=worker_name("dev"))
        services = replace(services, worker=worker.name)
    config = uvicorn.Config(
        combined_app(services),
        host=host,
        port=port,
        lifespan="off",
        http=GuardedProtocol,  # httptools with request deadlines and a connection cap
        # Postbag decides itself whom to believe for X-Forwarded-For (POSTBAG_TRUSTED_PROXIES,
        # `core.intake.visitor`); uvicorn's own rewriting would trust 127.0.0.1 regardless.
        proxy_headers=False,
        log_config=None,
        access_log=False,
    )
    server = uvicorn.Server(config)
    prepare_serving()
    settle_heap()
    running = asyncio.create_task(worker.run()) if worker is not None else None
    try:
        await server.serve()
    finally:
        if worker is not None and running is not None:
            worker.stop.set()
            await running
            await worker.services.db.close()
        await close_shared_client()
        await close_schema_checker()
        await services.db.close()
