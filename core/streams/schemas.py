"""Stream schemas: the versions (`core.owner.schema_versions`, as a form's), one optionally
per event type; suggestions inferred from stored events, which the owner adopts."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from core.owner import schema_versions
from core.owner.changes import Change
from core.owner.schema_versions import STREAM
from core.platform.db import Conn
from core.platform.errors import InvalidInput
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.schemas.inference import infer_schema

# How many of a stream's newest events a suggestion is inferred from.
SAMPLE_EVENTS = 1_000


class StreamSchemaFields(BaseModel):
    """A new schema version: a JSON Schema of the events' `data`, for one event type or
    (without `event_type`) for every type that has none of its own."""

    model_config = ConfigDict(extra="forbid")

    event_type: Annotated[str, StringConstraints(min_length=1, max_length=200)] | None = None
    # Named `json_schema` in Python: `schema` would shadow a BaseModel attribute.
    json_schema: dict[str, Any] = Field(
        alias="schema",
        examples=[{"type": "object", "required": ["order"], "properties": {"order": {}}}],
    )


@scoped
async def append_stream_schema(
    conn: Conn, scope: OrgScope, *, stream_id: str, fields: StreamSchemaFields
) -> dict[str, Any]:
    """Append the stream's next version (`manual`); refused past a limit of
    `core.schemas.limits` (InvalidSchema) or past the plan's versions per stream
    (PlanLimitReached)."""
    return await schema_versions.append(
        conn,
        scope,
        STREAM,
        stream_id,
        fields.json_schema,
        source="manual",
        event_type=fields.event_type,
    )


@scoped
async def infer_stream_schema(
    conn: Conn, scope: OrgScope, *, stream_id: str, event_type: str | None
) -> dict[str, Any]:
    """Append a `suggested` version inferred from the data of the stream's newest
    SAMPLE_EVENTS events (of `event_type`, when given). A suggestion is never checked
    against: the owner adopts it (`adopt_stream_schema`)."""
    cur = await conn.execute(
        queries["stream_event_samples"],
        {
            "stream_id": stream_id,
            "organization_id": scope.organization_id,
            "event_type": event_type,
            "limit": SAMPLE_EVENTS,
        },
    )
    samples = [row["data"] for row in await cur.fetchall()]
    if not samples:
        await schema_versions.require_live(conn, scope, STREAM, stream_id)
        raise InvalidInput(
            "no stored events to infer a schema from",
            [{"field": "event_type", "message": "no stored events with data"}],
        )
    schema = await asyncio.to_thread(infer_schema, samples)
    return await schema_versions.append(
        conn, scope, STREAM, stream_id, schema, source="suggested", event_type=event_type
    )


@scoped
async def adopt_stream_version(
    conn: Conn, scope: OrgScope, *, stream_id: str, version: int
) -> dict[str, Any]:
    """Make a version current for its event type: append a `manual` copy of it."""
    return await schema_versions.adopt(conn, scope, STREAM, stream_id, version)


async def add_stream_schema(
    change: Change, *, stream_id: str, fields: StreamSchemaFields
) -> dict[str, Any]:
    """Append the stream's next version (`append_stream_schema`) as the change."""
    async with change as conn:
        return await append_stream_schema(conn, change.scope, stream_id=stream_id, fields=fields)


async def suggest_stream_schema(
    change: Change, *, stream_id: str, event_type: str | None
) -> dict[str, Any]:
    """Append a suggested version (`infer_stream_schema`) as the change."""
    async with change as conn:
        return await infer_stream_schema(
            conn, change.scope, stream_id=stream_id, event_type=event_type
        )


async def adopt_stream_schema(change: Change, *, stream_id: str, version: int) -> dict[str, Any]:
    """Make a version current for its event type (`adopt_stream_version`) as the change."""
    async with change as conn:
        return await adopt_stream_version(conn, change.scope, stream_id=stream_id, version=version)


@scoped
async def list_stream_schemas(
    conn: Conn, scope: OrgScope, *, stream_id: str, after: int | None, limit: int
) -> list[dict[str, Any]]:
    """A live stream's schema versions, oldest first, after version `after`."""
    return await schema_versions.page(conn, scope, STREAM, stream_id, after=after, limit=limit)
