"""`/mcp` on the api app: the Bearer key first (401 without), then one stateless MCP exchange.

Each request is served on its own: the key is checked like `/v1` checks it, the tools
get the key's role (each tool's permission is checked against it) and an in-process `/v1`
client sending the caller's own `Authorization` header (so they see the key's
organization and nothing else, and their `/v1` calls are audited as this request's), and
a stateless, JSON-answering MCP transport runs for that request alone. Nothing lives
between requests, so the endpoint works the same in the api function (one invocation per
request) and in the runner. The MCP SDK is imported on the first `/mcp` request, not when
the api app starts.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar
from typing import TYPE_CHECKING

from fastapi import FastAPI
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from core.http.access import calls_from, origin_of
from core.http.client import ApiClient
from core.http.v1.auth import access_of_key
from core.owner.roles import Actor
from core.platform.services import Services

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

_client: ContextVar[ApiClient] = ContextVar("postbag_mcp_client")
_actor: ContextVar[Actor] = ContextVar("postbag_mcp_actor")


def _authorization(scope: Scope) -> str:
    for name, value in scope["headers"]:
        if name == b"authorization":
            return str(value.decode("latin-1"))
    return ""


def _bearer_key(authorization: str) -> str | None:
    scheme, _, key = authorization.partition(" ")
    return key.strip() if scheme.lower() == "bearer" and key.strip() else None


class McpEndpoint:
    """The ASGI app at `/mcp`; `api_app` is the app it is mounted on (its `/v1` is called)."""

    def __init__(self, api_app: ASGIApp, services: Services) -> None:
        self._api_app = api_app
        self._services = services
        self._server: MCPServer | None = None

    def _mcp_server(self) -> MCPServer:
        if self._server is None:
            from core.http.agents.tools import build_server

            self._server = build_server(_client.get, _actor.get)
            # The SDK logs its manager's start and stop at INFO: twice per request here.
            logging.getLogger("mcp.server.streamable_http_manager").setLevel(logging.WARNING)
        return self._server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        authorization = _authorization(scope)
        # Unauthenticated → 401; too many bad keys from this client → 429, as on `/v1`.
        request = Request(scope)
        access = await access_of_key(request, self._services, _bearer_key(authorization))
        origin = origin_of(request, self._services, "mcp")
        from mcp.server.transport_security import TransportSecuritySettings

        server = self._mcp_server()
        # The key is the credential: a page cannot send it across origins, so the SDK's
        # DNS-rebinding check (which would pin the Host header to localhost) is off.
        server.streamable_http_app(
            streamable_http_path="/",
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        # A manager of this request's own (the one the line above made): its task group
        # lives only while this request is served, so `/mcp` needs no lifespan, which
        # neither the api function nor the runner runs.
        manager = server.session_manager
        client = ApiClient.in_process(self._api_app, authorization)
        token, acting = _client.set(client), _actor.set(access.actor)
        try:
            # The tools' `/v1` calls are audited as this request's: via `mcp`, its client.
            with calls_from(origin):
                async with manager.run():
                    await manager.handle_request(scope, receive, send)
        finally:
            _actor.reset(acting)
            _client.reset(token)
            await client.aclose()


def mount_mcp(app: FastAPI, services: Services) -> None:
    """Route `/mcp` of the api app `app` to the MCP endpoint."""
    endpoint = McpEndpoint(app, services)  # an ASGI app: Starlette hands it the raw request
    app.router.routes.append(
        Route("/mcp", endpoint, methods=["GET", "POST", "DELETE"], include_in_schema=False)
    )
