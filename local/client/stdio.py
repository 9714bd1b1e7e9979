"""`postbag mcp`: the MCP tools over stdio, each a `/v1` call to the logged-in Postbag."""

from __future__ import annotations

import asyncio

from core.http.agents.tools import build_server
from core.http.client import ApiClient
from core.platform.logs import configure_logging
from local.client.config import Login


async def _serve(login: Login) -> None:
    async with ApiClient.remote(login.url, login.key) as api:
        await build_server(lambda: api).run_stdio_async()


def serve_stdio(login: Login) -> None:
    """Serve until the MCP client closes stdin; logs go to stderr, stdout is the protocol's."""
    configure_logging("WARNING")
    asyncio.run(_serve(login))
