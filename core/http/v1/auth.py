"""Bearer-key authentication: every `/v1` request runs under its key's OrgScope, acting as
the key (its role); a client sending too many bad keys is throttled (`core.owner.throttle`).
Each route declares what it needs with `needs` (core/http/access.py)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.params import Depends as DependsParam
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from core.http.access import Access, Rule, declare, origin_of
from core.http.deps import throttled_client
from core.owner.organizations import authenticate_key
from core.owner.roles import Permission
from core.owner.throttle import bad_api_key
from core.platform.clock import utcnow
from core.platform.errors import IngestKeyOnly, Unauthenticated
from core.platform.scope import OrgScope
from core.platform.services import Services
from core.streams.streams import ingest_key_stream

_bearer = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer pb_…`")


async def access_of_key(request: Request, services: Services, key: str | None) -> Access:
    """The organization of a live API key and the key as the actor; otherwise 401 without
    saying why, or 429 once the client has sent too many bad keys (`/v1` and `/mcp` alike).
    A live ingest key is `403 ingest_key_only`: it posts events to its stream and does
    nothing else."""
    async with services.db.connection() as conn:
        try:
            scope, actor = await authenticate_key(conn, key)
        except Unauthenticated:
            if key and await ingest_key_stream(conn, key) is not None:
                raise IngestKeyOnly("an ingest key only posts events to its stream") from None
            await bad_api_key(conn, throttled_client(request, services), now=utcnow())
            raise
    return Access(scope, actor, origin_of(request, services, "api"))


async def require_access(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Access:
    """Who the request's live API key acts for (see `access_of_key`)."""
    services: Services = request.app.state.services
    key = credentials.credentials if credentials is not None else None
    return await access_of_key(request, services, key)


AccessDep = Annotated[Access, Depends(require_access)]


async def require_scope(access: AccessDep) -> OrgScope:
    """The organization of the request's live API key."""
    return access.scope


ScopeDep = Annotated[OrgScope, Depends(require_scope)]


def needs(
    permission: Permission,
    action: str | None = None,
    *,
    subject: str | None = None,
    status: int | None = None,
) -> DependsParam:
    """A `/v1` route's rule: the permission its key's role needs, and the audit action it
    records on success (see `core.http.access.Rule`)."""
    return declare(Rule(permission, action, subject, status), require_access)
