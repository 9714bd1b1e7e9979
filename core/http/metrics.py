"""`GET /metrics`: the process's Prometheus metrics (`core.platform.metrics`), behind the
Bearer token `POSTBAG_METRICS_TOKEN` when it is set.

Served by `postbag serve` and `postbag dev` beside their apps and by `postbag worker
--metrics-port`; never by the cloud's functions (each sandbox would count alone).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
from collections.abc import AsyncIterator, Iterator

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from core.http.problems import install_problem_handlers, problem
from core.http.protocol import GuardedProtocol
from core.platform.clock import utcnow
from core.platform.metrics import Scrape
from core.platform.services import Services

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _authorized(request: Request, services: Services) -> bool:
    token = services.settings.metrics_token
    if token is None:
        return True
    given = request.headers.get("authorization", "")
    scheme, _, value = given.partition(" ")
    return scheme.lower() == "bearer" and hmac.compare_digest(
        value.strip().encode(), token.get_secret_value().encode()
    )


def create_metrics_app(services: Services) -> Starlette:
    """An app answering `GET /metrics` alone, over `services`' pool."""
    scrape = Scrape(services.db)

    async def metrics(request: Request) -> Response:
        if not _authorized(request, services):
            return problem(
                401,
                "unauthenticated",
                "GET /metrics needs the Bearer token POSTBAG_METRICS_TOKEN",
                headers={"WWW-Authenticate": 'Bearer realm="metrics"'},
            )
        return Response(await scrape.render(now=utcnow()), media_type=CONTENT_TYPE)

    app = Starlette(routes=[Route("/metrics", metrics, methods=["GET"])])
    install_problem_handlers(app)
    return app


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the process beside it (the worker) has its own,
    and stops this server when it stops."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@contextlib.asynccontextmanager
async def serve_metrics(services: Services, *, host: str, port: int) -> AsyncIterator[None]:
    """Serve `GET /metrics` on `host:port` for as long as the block runs (`postbag worker
    --metrics-port`); a port that cannot be bound stops the process before the block."""
    server = _Server(
        uvicorn.Config(
            create_metrics_app(services),
            host=host,
            port=port,
            lifespan="off",
            http=GuardedProtocol,
            proxy_headers=False,
            server_header=False,
            log_config=None,
            access_log=False,
        )
    )
    serving = asyncio.create_task(server.serve())
    while not server.started and not serving.done():
        await asyncio.sleep(0.01)
    if serving.done():
        serving.result()  # uvicorn exits the process when it cannot bind
    try:
        yield
    finally:
        server.should_exit = True
        await serving
