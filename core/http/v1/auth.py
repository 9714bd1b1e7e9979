"""Bearer-key authentication: every `/v1` request runs under its key's OrgScope."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from core.owner.organizations import authenticate
from core.platform.scope import OrgScope
from core.platform.services import Services

_bearer = HTTPBearer(auto_error=False, description="An API key: `Authorization: Bearer pb_…`")


async def require_scope(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> OrgScope:
    """The organization of a live API key; otherwise 401 without saying why."""
    services: Services = request.app.state.services
    key = credentials.credentials if credentials is not None else None
    async with services.db.connection() as conn:
        return await authenticate(conn, key)


ScopeDep = Annotated[OrgScope, Depends(require_scope)]
