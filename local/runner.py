"""`postbag dev`: uvicorn serving both apps, plus a cron loop firing the registered ticks."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import psycopg
import uvicorn

from core.destinations.http import close_shared_client
from core.http.api_app import create_api_app
from core.http.submit_app import create_submit_app
from core.platform.clock import utcnow
from core.platform.logs import log
from core.platform.services import Services
from core.ticks.registry import TICKS, Tick, run_pass
from local.protocol import HeaderTimeoutProtocol

ASGIApp = Callable[
    [MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]],
    Awaitable[None],
]

API_PREFIXES = ("/v1", "/app", "/mcp")


def combined_app(services: Services) -> ASGIApp:
    """One ASGI app: `/v1`, `/app` and `/mcp` go to the api app, everything else to submit."""
    submit = create_submit_app(services, local=True)
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


# Deliveries written by one request burst arrive as a burst of notifications: one pass.
DEBOUNCE_SECONDS = 0.05
CHANNEL = "postbag_deliveries"


async def _fire(services: Services, tick: Tick, wake: asyncio.Event | None = None) -> None:
    while True:
        try:
            await run_pass(services, tick, now=utcnow(), budget=tick.every_seconds)
        except Exception:
            log.exception("tick pass failed", extra={"tick": tick.name})
        if wake is None:
            await asyncio.sleep(tick.every_seconds)
            continue
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), tick.every_seconds)
        await asyncio.sleep(DEBOUNCE_SECONDS)
        wake.clear()


async def listen(url: str, wake: asyncio.Event) -> None:
    """Set `wake` on every `postbag_deliveries` notification; reconnect when the link drops.

    Realtime only accelerates: a lost notification costs at most one tick interval.
    """
    while True:
        try:
            conn = await psycopg.AsyncConnection.connect(url, autocommit=True)
            async with conn:
                await conn.execute(f"LISTEN {CHANNEL}")
                wake.set()  # rows may have arrived while we were not listening
                async for _notify in conn.notifies():
                    wake.set()
        except psycopg.Error:
            log.warning("LISTEN connection lost; retrying", extra={"tick": "deliver"})
            await asyncio.sleep(1.0)


async def cron_loop(services: Services) -> None:
    """Fire every registered tick on its schedule until cancelled; `deliver` also on notify."""
    wake = asyncio.Event()
    async with asyncio.TaskGroup() as group:
        group.create_task(listen(services.db.url, wake))
        for tick in TICKS.values():
            group.create_task(_fire(services, tick, wake if tick.name == "deliver" else None))


async def serve(services: Services, *, host: str, port: int, ticks: bool = True) -> None:
    """Serve HTTP (and run the ticks, unless `ticks` is off) until SIGINT/SIGTERM, then
    close the pool."""
    config = uvicorn.Config(
        combined_app(services),
        host=host,
        port=port,
        lifespan="off",
        http=HeaderTimeoutProtocol,  # httptools with a header-read timeout
        # Postbag decides itself whom to believe for X-Forwarded-For (POSTBAG_TRUSTED_PROXIES,
        # `core.intake.visitor`); uvicorn's own rewriting would trust 127.0.0.1 regardless.
        proxy_headers=False,
        log_config=None,
        access_log=False,
    )
    server = uvicorn.Server(config)
    # Everything built so far (modules, apps, pool) lives as long as the process: keep it
    # out of the collector's scans, whose full passes over it were the p99 of a submit.
    gc.freeze()
    cron = asyncio.create_task(cron_loop(services)) if ticks else None
    try:
        await server.serve()
    finally:
        if cron is not None:
            cron.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await cron
        await close_shared_client()
        await services.db.close()
