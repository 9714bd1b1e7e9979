"""For the fuzzers (synchronous hypothesis tests) and the seeded runner: an app served by a
real uvicorn server on loopback from a thread of its own, and a tenant made outside any
running loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import uvicorn
from psycopg.rows import dict_row
from starlette.types import ASGIApp

from core.destinations.http import close_shared_client
from core.platform.services import Services
from tests.support.builders import Tenant, make_form, make_tenant
from tests.support.peers import free_port
from tests.support.settings import built_services


@contextmanager
def served(
    db_url: str, tmp_path: Path, build: Callable[[Services], ASGIApp], *, pool_max: int = 4
) -> Iterator[str]:
    """The base URL of `build(services)` served until the block ends."""
    port = free_port()
    started = threading.Event()
    server: list[uvicorn.Server] = []

    async def serve() -> None:
        async with built_services(db_url, tmp_path, pool_max=pool_max) as services:
            config = uvicorn.Config(
                build(services),
                host="127.0.0.1",
                port=port,
                log_config=None,
                lifespan="off",
                access_log=False,
                timeout_graceful_shutdown=1,
            )
            server.append(uvicorn.Server(config))
            task = asyncio.create_task(server[0].serve())
            while not server[0].started and not task.done():
                await asyncio.sleep(0.02)
            started.set()
            try:
                await task
            finally:
                # A test send opens this loop's HTTP client: closed with the loop, as
                # `postbag serve` does, not left to the garbage collector (a warning).
                await close_shared_client()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert started.wait(60), "the server did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server[0].should_exit = True
        thread.join(30)


def tenant_with_form(db_url: str, **form_columns: object) -> tuple[Tenant, str]:
    """A new tenant with one form (no routes), made on a connection of its own."""

    async def make() -> tuple[Tenant, str]:
        conn = await psycopg.AsyncConnection.connect(db_url, autocommit=True, row_factory=dict_row)
        try:
            tenant = await make_tenant(conn)
            return tenant, await make_form(conn, tenant, **form_columns)
        finally:
            await conn.close()

    return asyncio.run(make())
