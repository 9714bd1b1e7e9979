"""Stream routes: which of a stream's events go to which destination (immediately)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

import psycopg
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from core.owner.changes import Change
from core.platform.db import Conn
from core.platform.errors import NotFound, RouteExists
from core.platform.ids import new_id
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.platform.vocabulary import StreamEventStatus

EventType = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class StreamRouteFields(BaseModel):
    """A stream route as created: every event type (or those listed), accepted events (or
    the statuses listed), sent as each event arrives."""

    model_config = ConfigDict(extra="forbid")

    destination_id: str
    enabled: bool = True
    event_types: list[EventType] | None = Field(default=None, min_length=1, max_length=100)
    include_statuses: list[StreamEventStatus] = Field(
        default_factory=lambda: list[StreamEventStatus](["accepted"]), min_length=1
    )
    mode: Literal["immediate"] = "immediate"


@scoped
async def add_stream_route(
    conn: Conn, scope: OrgScope, *, stream_id: str, fields: StreamRouteFields
) -> dict[str, Any]:
    """Route a live stream to a live destination; one live route per pair."""
    types = fields.event_types
    params = {
        "id": new_id("srt"),
        "organization_id": scope.organization_id,
        "stream_id": stream_id,
        "destination_id": fields.destination_id,
        "enabled": fields.enabled,
        "event_types": None if types is None else list(dict.fromkeys(types)),
        "include_statuses": list(dict.fromkeys(fields.include_statuses)),
    }
    try:
        # A savepoint keeps the caller's transaction usable after the refusal.
        async with conn.transaction():
            row = await (await conn.execute(queries["insert_stream_route"], params)).fetchone()
    except psycopg.errors.UniqueViolation:
        raise RouteExists("the stream already has a route to this destination") from None
    if row is None:
        raise NotFound(f"no stream {stream_id} or no destination {fields.destination_id}")
    return row


@scoped
async def list_stream_routes(
    conn: Conn, scope: OrgScope, *, stream_id: str, after: str | None, limit: int
) -> list[dict[str, Any]]:
    """A live stream's live routes, oldest first."""
    params = {"id": stream_id, "organization_id": scope.organization_id}
    if await (await conn.execute(queries["get_stream"], params)).fetchone() is None:
        raise NotFound(f"no stream {stream_id}")
    cur = await conn.execute(
        queries["list_stream_routes"],
        {
            "stream_id": stream_id,
            "organization_id": scope.organization_id,
            "after": after,
            "limit": limit,
        },
    )
    return await cur.fetchall()


@scoped
async def remove_stream_route(
    conn: Conn, scope: OrgScope, *, stream_id: str, route_id: str
) -> None:
    """Remove a route; deliveries already queued through it are kept."""
    cur = await conn.execute(
        queries["delete_stream_route"],
        {"id": route_id, "stream_id": stream_id, "organization_id": scope.organization_id},
    )
    if await cur.fetchone() is None:
        raise NotFound(f"no route {route_id}")


async def create_stream_route(
    change: Change, *, stream_id: str, fields: StreamRouteFields
) -> dict[str, Any]:
    """Route a stream to a destination (`add_stream_route`) as the change."""
    async with change as conn:
        row = await add_stream_route(conn, change.scope, stream_id=stream_id, fields=fields)
        change.subject = row["id"]
    return row


async def delete_stream_route(change: Change, *, stream_id: str, route_id: str) -> None:
    """Remove a stream route (`remove_stream_route`) as the change."""
    async with change as conn:
        await remove_stream_route(conn, change.scope, stream_id=stream_id, route_id=route_id)
