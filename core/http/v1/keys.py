"""`/v1/keys`: API keys, shown once at creation, listed by prefix and name, revoked at once."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, StringConstraints

from core.http.deps import ServicesDep
from core.http.v1.auth import ScopeDep
from core.http.v1.shared import Page, PageDep, problems
from core.owner import organizations

router = APIRouter(tags=["keys"], responses=problems(401, 503))


class KeyFields(BaseModel):
    """A new key."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, StringConstraints(min_length=1, max_length=200)]


class Key(BaseModel):
    """A live key as listed: never the key itself."""

    id: str
    name: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None = None


class CreatedKey(Key):
    """A new key, with the key itself: shown in this response only."""

    key: str


@router.post("/keys", status_code=201, responses=problems(402, 422))
async def create_key(body: KeyFields, scope: ScopeDep, services: ServicesDep) -> CreatedKey:
    """Create an API key for the organization; store `key` now, it is never shown again."""
    async with services.db.scoped(scope) as conn:
        new = await organizations.create_api_key(conn, scope, name=body.name)
    return CreatedKey(
        id=new.id, name=new.name, prefix=new.prefix, created_at=new.created_at, key=new.secret
    )


@router.get("/keys", responses=problems(422))
async def list_keys(scope: ScopeDep, services: ServicesDep, page: PageDep) -> Page[Key]:
    """The organization's live keys (prefix and name only)."""
    async with services.db.scoped(scope) as conn:
        rows = await organizations.list_api_keys(
            conn, scope, after=page.after_id(), limit=page.limit + 1
        )
    data, cursor = page.page(rows, "id")
    return Page[Key](data=[Key(**row) for row in data], next_cursor=cursor)


@router.delete(
    "/keys/{key_id}", status_code=204, response_class=Response, responses=problems(404, 422)
)
async def revoke_key(key_id: str, scope: ScopeDep, services: ServicesDep) -> None:
    """Revoke a key at once: its next request is `401` (a key may revoke itself)."""
    async with services.db.scoped(scope) as conn:
        await organizations.revoke_api_key(conn, scope, key_id=key_id)
