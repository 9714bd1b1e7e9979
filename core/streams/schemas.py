"""Stream schemas: append-only JSON Schema versions, one optionally per event type, checked
against the limits of `core.schemas.limits` when saved (the database refuses an UPDATE)."""

from __future__ import annotations

from typing import Annotated, Any

from psycopg.types.json import Jsonb
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from core.owner.plans import PLANS
from core.platform.db import Conn
from core.platform.errors import NotFound, PlanLimitReached
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.schemas.limits import check_schema


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
async def add_stream_schema(
    conn: Conn, scope: OrgScope, *, stream_id: str, fields: StreamSchemaFields
) -> dict[str, Any]:
    """Append the stream's next version; refused past a limit of `core.schemas.limits`
    (InvalidSchema) or past the plan's versions per stream (PlanLimitReached)."""
    check_schema(fields.json_schema)
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
        {**scoped_params, "event_type": fields.event_type, "schema": Jsonb(fields.json_schema)},
    )
    row = await cur.fetchone()
    assert row is not None
    return row


@scoped
async def list_stream_schemas(
    conn: Conn, scope: OrgScope, *, stream_id: str, after: int | None, limit: int
) -> list[dict[str, Any]]:
    """A live stream's schema versions, oldest first, after version `after`."""
    params = {"id": stream_id, "organization_id": scope.organization_id}
    if await (await conn.execute(queries["get_stream"], params)).fetchone() is None:
        raise NotFound(f"no stream {stream_id}")
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
