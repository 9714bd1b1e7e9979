"""Stream schemas: append-only JSON Schema versions, one optionally per event type, checked
against the limits of `core.schemas.limits` when saved (the database refuses an UPDATE);
suggestions inferred from stored events, which the owner adopts."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

from psycopg.types.json import Jsonb
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from core.owner.plans import PLANS
from core.platform.db import Conn
from core.platform.errors import InvalidInput, NotFound, PlanLimitReached
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.platform.vocabulary import SchemaSource
from core.schemas.inference import infer_schema
from core.schemas.limits import check_schema

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


async def _append(
    conn: Conn,
    scope: OrgScope,
    stream_id: str,
    event_type: str | None,
    schema: dict[str, Any],
    source: SchemaSource,
) -> dict[str, Any]:
    check_schema(schema)
    params = {"id": stream_id, "organization_id": scope.organization_id}
    # The stream's row lock serialises appends, so two at once get versions n+1 and n+2.
    stream = await (await conn.execute(queries["lock_stream"], params)).fetchone()
    if stream is None:
        raise NotFound(f"no stream {stream_id}")
    scoped_params = {"stream_id": stream_id, "organization_id": scope.organization_id}
    count = await (await conn.execute(queries["count_stream_schemas"], scoped_params)).fetchone()
    limit = PLANS[stream["plan"]].max_schema_versions
    if count is not None and limit is not None and int(count["n"]) >= limit:
        raise PlanLimitReached(
            f"the {stream['plan']} plan allows {limit} schema versions per stream"
        )
    cur = await conn.execute(
        queries["insert_stream_schema"],
        {**scoped_params, "event_type": event_type, "schema": Jsonb(schema), "source": source},
    )
    row = await cur.fetchone()
    assert row is not None
    return row


@scoped
async def add_stream_schema(
    conn: Conn, scope: OrgScope, *, stream_id: str, fields: StreamSchemaFields
) -> dict[str, Any]:
    """Append the stream's next version (`manual`); refused past a limit of
    `core.schemas.limits` (InvalidSchema) or past the plan's versions per stream
    (PlanLimitReached)."""
    return await _append(conn, scope, stream_id, fields.event_type, fields.json_schema, "manual")


@scoped
async def suggest_stream_schema(
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
        await _require_stream(conn, scope, stream_id)
        raise InvalidInput(
            "no stored events to infer a schema from",
            [{"field": "event_type", "message": "no stored events with data"}],
        )
    schema = await asyncio.to_thread(infer_schema, samples)
    return await _append(conn, scope, stream_id, event_type, schema, "suggested")


@scoped
async def adopt_stream_schema(
    conn: Conn, scope: OrgScope, *, stream_id: str, version: int
) -> dict[str, Any]:
    """Make a version current for its event type: append a `manual` copy of it."""
    cur = await conn.execute(
        queries["get_stream_schema"],
        {"stream_id": stream_id, "organization_id": scope.organization_id, "version": version},
    )
    row = await cur.fetchone()
    if row is None:
        raise NotFound(f"no schema version {version} of stream {stream_id}")
    return await _append(conn, scope, stream_id, row["event_type"], row["schema"], "manual")


async def _require_stream(conn: Conn, scope: OrgScope, stream_id: str) -> None:
    params = {"id": stream_id, "organization_id": scope.organization_id}
    if await (await conn.execute(queries["get_stream"], params)).fetchone() is None:
        raise NotFound(f"no stream {stream_id}")


@scoped
async def list_stream_schemas(
    conn: Conn, scope: OrgScope, *, stream_id: str, after: int | None, limit: int
) -> list[dict[str, Any]]:
    """A live stream's schema versions, oldest first, after version `after`."""
    await _require_stream(conn, scope, stream_id)
    cur = await conn.execute(
        queries["list_stream_schemas"],
        {
            "stream_id": stream_id,
            "organization_id": scope.organization_id,
            "after": after,
            "limit": limit,
        },
    )
    return await cur.fetchall()
