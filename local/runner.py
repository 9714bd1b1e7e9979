"""`postbag dev`: uvicorn serving both apps, plus a cron loop firing the registered ticks."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import uvicorn

from core.http.api_app import create_api_app
from core.http.submit_app import create_submit_app
from core.logs import log
from core.services import Services, utcnow
from core.ticks import TICKS, Tick, run_pass

ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]

API_PREFIXES = ("/v1", "/app")


def combined_app(services: Services) -> ASGIApp:
    """One ASGI app: `/v1` and `/app` go to the api app, everything else to submit."""
    submit = create_submit_app(services)
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


async def _fire(services: Services, tick: Tick) -> None:
    while True:
        try:
            await run_pass(services, tick, now=utcnow(), budget=tick.every_seconds)
        except Exception:
            log.exception("tick pass failed", extra={"tick": tick.name})
        await asyncio.sleep(tick.every_seconds)


async def cron_loop(services: Services) -> None:
    """Fire every registered tick on its schedule until cancelled."""
    async with asyncio.TaskGroup() as group:
        for tick in TICKS.values():
            group.create_task(_fire(services, tick))


async def serve(services: Services, *, host: str, port: int) -> None:
    """Serve HTTP and run the ticks until SIGINT/SIGTERM, then close the pool."""
    config = uvicorn.Config(
        combined_app(services),
        host=host,
        port=port,
        lifespan="off",
        log_config=None,
        access_log=False,
    )
    server = uvicorn.Server(config)
    cron = asyncio.create_task(cron_loop(services))
    try:
        await server.serve()
    finally:
        cron.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await cron
        await services.db.close()
