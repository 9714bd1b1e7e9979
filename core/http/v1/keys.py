"""`/v1/keys`: API keys with roles, shown once at creation, listed by prefix and name, revoked
at once."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from core.http.access import AuditedRoute, ChangeDep
from core.http.deps import ServicesDep
from core.http.v1.auth import ScopeDep, needs
from core.http.v1.shared import Page, PageDep, problems
from core.owner import organizations
from core.platform.vocabulary import Role

router = APIRouter(tags=["keys"], responses=problems(401, 503), route_class=AuditedRoute)


class KeyFields(BaseModel):
    """A new key."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    role: Role = Field(
        default="admin",
        description="what the key may do (docs/teams.md); at most the creating key's own role",
    )


class Key(BaseModel):
    """A live key as listed: never the key itself."""

    id: str
    name: str
    prefix: str
    role: Role
    created_at: datetime
    last_used_at: datetime | None = None


class CreatedKey(Key):
    """A new key, with the key itself: shown in this response only."""

    key: str


@router.post(
    "/keys",
    dependencies=[needs("configure", "key.created")],
    status_code=201,
    responses=problems(402, 422),
)
async def create_key(change: ChangeDep, body: KeyFields) -> CreatedKey:
    """Create an API key with a role for the organization (`403 forbidden` above the
    caller's own role); store `key` now, it is never shown again."""
    new = await organizations.create_key(change, name=body.name, role=body.role)
    return CreatedKey(
        id=new.id,
        name=new.name,
        prefix=new.prefix,
        role=new.role,
        created_at=new.created_at,
        key=new.secret,
    )


@router.get("/keys", dependencies=[needs("configure")], responses=problems(422))
async def list_keys(scope: ScopeDep, services: ServicesDep, page: PageDep) -> Page[Key]:
    """The organization's live keys (prefix and name only)."""
    async with services.db.scoped(scope) as conn:
        rows = await organizations.list_api_keys(
            conn, scope, after=page.after_id(), limit=page.limit + 1
        )
    data, cursor = page.page(rows, "id")
    return Page[Key](data=[Key(**row) for row in data], next_cursor=cursor)


@router.delete(
    "/keys/{key_id}",
    dependencies=[needs("configure", "key.revoked")],
    status_code=204,
    response_class=Response,
    responses=problems(404, 422),
)
async def revoke_key(change: ChangeDep, key_id: str) -> None:
    """Revoke a key at once: its next request is `401` (a key may revoke itself, not a key
    above its own role)."""
    await organizations.revoke_key(change, key_id)
