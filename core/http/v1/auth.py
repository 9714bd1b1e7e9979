"""Bearer-key authentication: every `/v1` request runs under its key's OrgScope; a client
sending too many bad keys is throttled (`core.owner.throttle`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from core.http.deps import throttled_client
from core.owner.organizations import authenticate
from core.owner.throttle import bad_api_key
from core.platform.clock import utcnow
from core.platform.errors import IngestKeyOnly, Unauthenticated
from core.platform.scope import OrgScope
from core.platform.services import Services
from core.streams.streams import ingest_key_stream

_bearer = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer pb_…`")


async def scope_of_key(request: Request, services: Services, key: str | None) -> OrgScope:
    """The organization of a live API key; otherwise 401 without saying why, or 429 once
    the client has sent too many bad keys (`/v1` and `/mcp` alike). A live ingest key is
    `403 ingest_key_only`: it posts events to its stream and does nothing else."""
    async with services.db.connection() as conn:
        try:
            return await authenticate(conn, key)
        except Unauthenticated:
            if key and await ingest_key_stream(conn, key) is not None:
                raise IngestKeyOnly("an ingest key only posts events to its stream") from None
            await bad_api_key(conn, throttled_client(request, services), now=utcnow())
            raise


async def require_scope(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> OrgScope:
    """The organization of the request's live API key (see `scope_of_key`)."""
    services: Services = request.app.state.services
    key = credentials.credentials if credentials is not None else None
    return await scope_of_key(request, services, key)


ScopeDep = Annotated[OrgScope, Depends(require_scope)]
