"""`postbag dev`: uvicorn serving both apps (`core.http.server`), plus the worker loop of
`postbag worker` (`core.ticks.worker`), in one process."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import uvicorn

from core.destinations.http import close_shared_client
from core.http.protocol import GuardedProtocol, prepare_serving
from core.http.server import combined_app, settle_heap
from core.platform.services import Services
from core.schemas.checker import close_schema_checker
from core.ticks.registry import worker_name
from core.ticks.worker import Worker, worker_services


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
