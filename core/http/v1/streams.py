"""`/v1/streams`: streams, their ingest keys, schema versions, routes and stored events
(ingest itself is `core.http.v1.ingest`)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from core.http.access import AuditedRoute, ChangeDep
from core.http.deps import NowDep, ServicesDep
from core.http.v1.auth import ScopeDep, needs
from core.http.v1.shared import Page, PageDep, problems, read_one
from core.platform.vocabulary import SchemaMode, SchemaSource, StreamEventStatus
from core.streams import events, schemas, streams
from core.streams.routes import StreamRouteFields, create_stream_route, delete_stream_route
from core.streams.routes import list_stream_routes as list_routes
from core.streams.schemas import StreamSchemaFields
from core.streams.streams import StreamFields, StreamPatch

router = APIRouter(tags=["streams"], responses=problems(401, 503), route_class=AuditedRoute)


class Stream(BaseModel):
    """A stream as read."""

    id: str
    name: str
    schema_mode: SchemaMode
    retention_days: int | None
    accepting: bool
    created_at: datetime
    updated_at: datetime


class IngestKey(BaseModel):
    """A live ingest key as listed: never the key itself."""

    id: str
    stream_id: str
    name: str
    prefix: str
    created_at: datetime


class CreatedIngestKey(IngestKey):
    """A new ingest key, with the key itself: shown in this response only."""

    key: str


class CreatedStream(Stream):
    """A new stream with its first ingest key (`pbs_…`), shown in this response only."""

    ingest_key: CreatedIngestKey


class IngestKeyFields(BaseModel):
    """A new ingest key."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[str, StringConstraints(min_length=1, max_length=200)] = "ingest"


class StreamSchema(BaseModel):
    """One schema version of a stream."""

    model_config = ConfigDict(serialize_by_alias=True)

    version: int
    event_type: str | None
    json_schema: dict[str, Any] = Field(alias="schema")
    source: SchemaSource
    created_at: datetime


class StreamRoute(BaseModel):
    """A stream route as read."""

    id: str
    stream_id: str
    destination_id: str
    enabled: bool
    event_types: list[str] | None
    include_statuses: list[StreamEventStatus]
    mode: str = "immediate"
    created_at: datetime


class StoredEvent(BaseModel):
    """A stored event (`data` null once erased)."""

    event: str = Field(description="the receipt, `evt_…`")
    id: str | None = Field(description="the client's event id")
    type: str
    status: StreamEventStatus
    reason: str | None
    errors: list[dict[str, str]] | None
    schema_version: int | None
    data: dict[str, Any] | None
    occurred_at: datetime | None
    received_at: datetime
    erase_at: datetime | None
    erased_at: datetime | None
    released_at: datetime | None = Field(
        description="when its owner released it from quarantine, if they did"
    )


class EventDelivery(BaseModel):
    """One delivery of an event."""

    id: str
    destination_id: str | None
    channel: str
    status: str
    reason: str | None
    attempts: int
    next_attempt_at: datetime
    last_detail: str | None
    created_at: datetime
    sent_at: datetime | None


class EventWithDeliveries(StoredEvent):
    """An event with its delivery lines."""

    deliveries: list[EventDelivery]


def _stream(row: dict[str, Any]) -> Stream:
    return Stream.model_validate({name: row[name] for name in Stream.model_fields})


def _key(new: streams.NewIngestKey) -> CreatedIngestKey:
    return CreatedIngestKey.model_validate({**new.row, "key": new.secret})


def _event(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "event": row["id"],
        "id": row["client_id"],
        "type": row["type"],
        "status": row["status"],
        "reason": row["reason"],
        "errors": row["schema_errors"],
        "schema_version": row["schema_version"],
        "data": row["data"],
        "occurred_at": row["occurred_at"],
        "received_at": row["received_at"],
        "erase_at": row["erase_at"],
        "erased_at": row["erased_at"],
        "released_at": row["released_at"],
    }


def _schema(row: dict[str, Any]) -> StreamSchema:
    return StreamSchema.model_validate(
        {name: row[name] for name in ("version", "event_type", "schema", "source", "created_at")}
    )


@router.post(
    "/streams",
    dependencies=[needs("configure", "stream.created")],
    status_code=201,
    responses=problems(402, 422),
)
async def create_stream(change: ChangeDep, body: StreamFields) -> CreatedStream:
    """Create a stream (refused with `402 plan_limit` past the plan's streams), with its
    first ingest key: store `ingest_key.key` now, it is never shown again."""
    row, key = await streams.create_stream(change, fields=body)
    return CreatedStream.model_validate({**_stream(row).model_dump(), "ingest_key": _key(key)})


@router.get("/streams", dependencies=[needs("read")], responses=problems(422))
async def list_streams(scope: ScopeDep, services: ServicesDep, page: PageDep) -> Page[Stream]:
    """The organization's streams, oldest first."""
    async with services.db.scoped(scope) as conn:
        rows = await streams.list_streams(conn, scope, after=page.after_id(), limit=page.limit + 1)
    data, cursor = page.page(rows, "id")
    return Page[Stream](data=[_stream(row) for row in data], next_cursor=cursor)


@router.get("/streams/{stream_id}", dependencies=[needs("read")], responses=problems(404, 422))
async def get_stream(stream_id: str, scope: ScopeDep, services: ServicesDep) -> Stream:
    """One stream."""
    return _stream(await read_one(services, scope, streams.get_stream, stream_id=stream_id))


@router.patch(
    "/streams/{stream_id}",
    dependencies=[needs("configure", "stream.updated")],
    responses=problems(404, 422),
)
async def update_stream(change: ChangeDep, stream_id: str, body: StreamPatch) -> Stream:
    """Change some settings; fields left out keep their value."""
    row = await streams.update_stream(change, stream_id=stream_id, patch=body)
    return _stream(row)


@router.delete(
    "/streams/{stream_id}",
    dependencies=[needs("configure", "stream.deleted")],
    status_code=204,
    response_class=Response,
    responses=problems(404, 422),
)
async def delete_stream(change: ChangeDep, stream_id: str) -> None:
    """Delete a stream: its ingest keys stop working and its routes go at once."""
    await streams.delete_stream(change, stream_id=stream_id)


@router.post(
    "/streams/{stream_id}/keys",
    dependencies=[needs("configure", "ingest_key.created")],
    status_code=201,
    responses=problems(404, 422),
)
async def create_ingest_key(
    change: ChangeDep, stream_id: str, body: IngestKeyFields
) -> CreatedIngestKey:
    """Another ingest key for the stream; `key` is shown in this response only."""
    new = await streams.create_ingest_key(change, stream_id=stream_id, name=body.name)
    return _key(new)


@router.get(
    "/streams/{stream_id}/keys", dependencies=[needs("configure")], responses=problems(404, 422)
)
async def list_ingest_keys(
    stream_id: str, scope: ScopeDep, services: ServicesDep, page: PageDep
) -> Page[IngestKey]:
    """The stream's live ingest keys (prefix and name only)."""
    async with services.db.scoped(scope) as conn:
        rows = await streams.list_ingest_keys(
            conn, scope, stream_id=stream_id, after=page.after_id(), limit=page.limit + 1
        )
    data, cursor = page.page(rows, "id")
    return Page[IngestKey](data=[IngestKey(**row) for row in data], next_cursor=cursor)


@router.delete(
    "/streams/{stream_id}/keys/{ingest_key_id}",
    dependencies=[needs("configure", "ingest_key.revoked")],
    status_code=204,
    response_class=Response,
    responses=problems(404, 422),
)
async def revoke_ingest_key(change: ChangeDep, stream_id: str, ingest_key_id: str) -> None:
    """Revoke an ingest key at once: its next event is `401`."""
    await streams.revoke_ingest_key(change, stream_id=stream_id, key_id=ingest_key_id)


@router.get(
    "/streams/{stream_id}/schemas", dependencies=[needs("read")], responses=problems(404, 422)
)
async def list_stream_schemas(
    stream_id: str, scope: ScopeDep, services: ServicesDep, page: PageDep
) -> Page[StreamSchema]:
    """The stream's schema versions, oldest first (per type, the last one is current)."""
    async with services.db.scoped(scope) as conn:
        rows = await schemas.list_stream_schemas(
            conn, scope, stream_id=stream_id, after=page.after_number(), limit=page.limit + 1
        )
    data, cursor = page.page(rows, "version")
    return Page[StreamSchema](data=[_schema(row) for row in data], next_cursor=cursor)


@router.post(
    "/streams/{stream_id}/schemas",
    dependencies=[needs("configure", "stream_schema.added", subject="stream_id")],
    status_code=201,
    responses=problems(402, 404, 422),
)
async def add_stream_schema(
    change: ChangeDep,
    stream_id: str,
    body: StreamSchemaFields,
) -> StreamSchema:
    """Append a schema version (for `event_type`, or the default); versions are never
    edited. `422 invalid_schema` past a limit of the schema engine."""
    row = await schemas.add_stream_schema(change, stream_id=stream_id, fields=body)
    return _schema(row)


class SuggestFields(BaseModel):
    """What to infer a schema for."""

    model_config = ConfigDict(extra="forbid")

    event_type: Annotated[str, StringConstraints(min_length=1, max_length=200)] | None = Field(
        default=None, description="infer from events of this type (all types when left out)"
    )


@router.post(
    "/streams/{stream_id}/schemas/suggest",
    dependencies=[needs("configure", "stream_schema.suggested", subject="stream_id")],
    status_code=201,
    responses=problems(402, 404, 422),
)
async def suggest_stream_schema(
    change: ChangeDep, stream_id: str, body: SuggestFields
) -> StreamSchema:
    """Append a `suggested` version inferred from the newest 1,000 stored events (of
    `event_type`); it is never checked against until adopted."""
    row = await schemas.suggest_stream_schema(
        change, stream_id=stream_id, event_type=body.event_type
    )
    return _schema(row)


@router.post(
    "/streams/{stream_id}/schemas/{version}/adopt",
    dependencies=[needs("configure", "stream_schema.adopted", subject="stream_id")],
    status_code=201,
    responses=problems(402, 404, 422),
)
async def adopt_stream_schema(change: ChangeDep, stream_id: str, version: int) -> StreamSchema:
    """Make a version (a suggestion) current for its event type: a `manual` copy of it."""
    row = await schemas.adopt_stream_schema(change, stream_id=stream_id, version=version)
    return _schema(row)


@router.post(
    "/streams/{stream_id}/routes",
    dependencies=[needs("configure", "stream_route.created")],
    status_code=201,
    responses=problems(404, 409, 422),
)
async def create_route(
    change: ChangeDep,
    stream_id: str,
    body: StreamRouteFields,
) -> StreamRoute:
    """Send the stream's events (of `event_types`, with `include_statuses`) to a destination."""
    row = await create_stream_route(change, stream_id=stream_id, fields=body)
    return StreamRoute(**row)


@router.get(
    "/streams/{stream_id}/routes", dependencies=[needs("read")], responses=problems(404, 422)
)
async def list_stream_routes(
    stream_id: str, scope: ScopeDep, services: ServicesDep, page: PageDep
) -> Page[StreamRoute]:
    """The stream's routes, oldest first."""
    async with services.db.scoped(scope) as conn:
        rows = await list_routes(
            conn, scope, stream_id=stream_id, after=page.after_id(), limit=page.limit + 1
        )
    data, cursor = page.page(rows, "id")
    return Page[StreamRoute](data=[StreamRoute(**row) for row in data], next_cursor=cursor)


@router.delete(
    "/streams/{stream_id}/routes/{stream_route_id}",
    dependencies=[needs("configure", "stream_route.deleted")],
    status_code=204,
    response_class=Response,
    responses=problems(404, 422),
)
async def delete_route(change: ChangeDep, stream_id: str, stream_route_id: str) -> None:
    """Remove a route; deliveries already queued through it are kept."""
    await delete_stream_route(change, stream_id=stream_id, route_id=stream_route_id)


@router.get(
    "/streams/{stream_id}/events",
    dependencies=[needs("read_values", "stream_event.listed", subject="stream_id")],
    responses=problems(404, 422),
)
async def list_events(
    stream_id: str,
    scope: ScopeDep,
    services: ServicesDep,
    page: PageDep,
    type: Annotated[str | None, Query(min_length=1, max_length=200)] = None,
    status: StreamEventStatus | None = None,
) -> Page[StoredEvent]:
    """The stream's events, newest first, of one `type` and `status` when given."""
    async with services.db.scoped(scope) as conn:
        rows = await events.list_events(
            conn,
            scope,
            stream_id=stream_id,
            type=type,
            status=status,
            before=page.after_id(),
            limit=page.limit + 1,
        )
    data, cursor = page.page(rows, "id")
    return Page[StoredEvent](
        data=[StoredEvent.model_validate(_event(row)) for row in data], next_cursor=cursor
    )


@router.get(
    "/streams/{stream_id}/events/{event_id}",
    dependencies=[needs("read_values", "stream_event.read")],
    responses=problems(404, 422),
)
async def get_event(
    stream_id: str, event_id: str, scope: ScopeDep, services: ServicesDep
) -> EventWithDeliveries:
    """One event with its delivery lines."""
    row, deliveries = await read_one(
        services, scope, events.get_event, stream_id=stream_id, event_id=event_id
    )
    return EventWithDeliveries.model_validate({**_event(row), "deliveries": deliveries})


@router.post(
    "/streams/{stream_id}/events/{event_id}/release",
    dependencies=[needs("operate", "stream_event.released")],
    responses=problems(404, 409, 422),
)
async def release_event(
    change: ChangeDep,
    stream_id: str,
    event_id: str,
    scope: ScopeDep,
    services: ServicesDep,
    now: NowDep,
) -> EventWithDeliveries:
    """Release a quarantined event: it becomes `accepted` and the stream's live routes that
    take accepted events of its type get one delivery each, once (`409 already_released`
    after; `409 values_erased` / `values_expired` when its data is gone). Answers the event
    with its delivery lines."""
    await events.release_event(change, services, stream_id=stream_id, event_id=event_id, now=now)
    return await get_event(stream_id, event_id, scope, services)


@router.post(
    "/streams/{stream_id}/events/{event_id}/erase",
    dependencies=[needs("operate", "stream_event.erased")],
    status_code=204,
    response_class=Response,
    responses=problems(404, 422),
)
async def erase_event(
    change: ChangeDep,
    stream_id: str,
    event_id: str,
    now: NowDep,
) -> None:
    """Erase the event's data and every copy of it: unsent deliveries end `skipped`
    (`values_erased`), receivers' answers are dropped."""
    await events.erase_event(change, stream_id=stream_id, event_id=event_id, now=now)
