"""Streams as an owner configures them, and their ingest keys (`pbs_…`, stored as a hash)."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from core.owner.changes import Change
from core.owner.organizations import hash_key
from core.owner.usage import reserve
from core.platform.db import Conn
from core.platform.errors import NotFound, invalid_input
from core.platform.ids import new_id
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.platform.vocabulary import SchemaMode

INGEST_KEY_PREFIX = "pbs_"

StreamName = Annotated[str, StringConstraints(min_length=1, max_length=200)]
RetentionDays = Annotated[int, Field(ge=1, le=3650)]


class StreamFields(BaseModel):
    """A stream as created."""

    model_config = ConfigDict(extra="forbid")

    name: StreamName
    schema_mode: SchemaMode = "off"
    retention_days: RetentionDays | None = Field(
        default=None, description="days an event keeps its data; null: the plan's"
    )
    accepting: bool = True


class StreamPatch(BaseModel):
    """A change to some of a stream's settings; fields left out keep their value."""

    model_config = ConfigDict(extra="forbid")

    name: StreamName | None = None
    schema_mode: SchemaMode | None = None
    retention_days: RetentionDays | None = None
    accepting: bool | None = None


@dataclass(frozen=True, slots=True)
class NewIngestKey:
    """An ingest key as shown once, at creation; only its hash is stored."""

    row: dict[str, Any]
    secret: str


def _columns(fields: StreamFields) -> dict[str, Any]:
    return fields.model_dump()


async def _new_key(conn: Conn, scope: OrgScope, stream_id: str, name: str) -> NewIngestKey:
    secret = INGEST_KEY_PREFIX + secrets.token_urlsafe(32)
    cur = await conn.execute(
        queries["insert_stream_key"],
        {
            "id": new_id("sky"),
            "organization_id": scope.organization_id,
            "stream_id": stream_id,
            "name": name,
            "prefix": secret[:11],
            "key_hash": hash_key(secret),
        },
    )
    row = await cur.fetchone()
    if row is None:
        raise NotFound(f"no stream {stream_id}")
    return NewIngestKey(row=row, secret=secret)


@scoped
async def add_stream(
    conn: Conn, scope: OrgScope, *, fields: StreamFields
) -> tuple[dict[str, Any], NewIngestKey]:
    """Create a stream within the plan's count of streams, with its first ingest key."""
    await reserve(conn, scope, kind="streams")
    cur = await conn.execute(
        queries["insert_stream"],
        {**_columns(fields), "id": new_id("str"), "organization_id": scope.organization_id},
    )
    row = await cur.fetchone()
    assert row is not None
    key = await _new_key(conn, scope, row["id"], "ingest")
    return row, key


@scoped
async def get_stream(conn: Conn, scope: OrgScope, *, stream_id: str) -> dict[str, Any]:
    """One live stream."""
    cur = await conn.execute(
        queries["get_stream"], {"id": stream_id, "organization_id": scope.organization_id}
    )
    row = await cur.fetchone()
    if row is None:
        raise NotFound(f"no stream {stream_id}")
    return row


@scoped
async def list_streams(
    conn: Conn, scope: OrgScope, *, after: str | None, limit: int
) -> list[dict[str, Any]]:
    """Up to `limit` live streams with ids after `after`."""
    cur = await conn.execute(
        queries["list_streams"],
        {"organization_id": scope.organization_id, "after": after, "limit": limit},
    )
    return await cur.fetchall()


@scoped
async def patch_stream(
    conn: Conn, scope: OrgScope, *, stream_id: str, patch: StreamPatch
) -> dict[str, Any]:
    """Change the settings `patch` sets (`retention_days: null` goes back to the plan's)."""
    current = await get_stream(conn, scope, stream_id=stream_id)
    changes = patch.model_dump(include=patch.model_fields_set)
    try:
        fields = StreamFields.model_validate(
            {name: current[name] for name in StreamFields.model_fields} | changes
        )
    except ValidationError as exc:
        raise invalid_input(exc) from None
    cur = await conn.execute(
        queries["update_stream"],
        {**_columns(fields), "id": stream_id, "organization_id": scope.organization_id},
    )
    row = await cur.fetchone()
    if row is None:
        raise NotFound(f"no stream {stream_id}")
    return row


@scoped
async def remove_stream(conn: Conn, scope: OrgScope, *, stream_id: str) -> None:
    """Delete a stream softly: its keys are revoked and its routes removed at once; its
    events stay until their retention ends."""
    cur = await conn.execute(
        queries["delete_stream"], {"id": stream_id, "organization_id": scope.organization_id}
    )
    if await cur.fetchone() is None:
        raise NotFound(f"no stream {stream_id}")


@scoped
async def add_ingest_key(conn: Conn, scope: OrgScope, *, stream_id: str, name: str) -> NewIngestKey:
    """Another ingest key for a live stream; the secret is returned here and never again."""
    return await _new_key(conn, scope, stream_id, name)


@scoped
async def list_ingest_keys(
    conn: Conn, scope: OrgScope, *, stream_id: str, after: str | None, limit: int
) -> list[dict[str, Any]]:
    """A live stream's live ingest keys (prefix and name, never a hash)."""
    await get_stream(conn, scope, stream_id=stream_id)
    cur = await conn.execute(
        queries["list_stream_keys"],
        {
            "organization_id": scope.organization_id,
            "stream_id": stream_id,
            "after": after,
            "limit": limit,
        },
    )
    return await cur.fetchall()


@scoped
async def end_ingest_key(conn: Conn, scope: OrgScope, *, stream_id: str, key_id: str) -> None:
    """Revoke an ingest key at once: the next event posted with it is refused."""
    cur = await conn.execute(
        queries["revoke_stream_key"],
        {"id": key_id, "stream_id": stream_id, "organization_id": scope.organization_id},
    )
    if await cur.fetchone() is None:
        raise NotFound(f"no key {key_id}")


async def create_stream(
    change: Change, *, fields: StreamFields
) -> tuple[dict[str, Any], NewIngestKey]:
    """Create a stream with its first ingest key (`add_stream`) as the change; the key is
    recorded too (`ingest_key.created`), as another key of the stream is."""
    async with change as conn:
        row, key = await add_stream(conn, change.scope, fields=fields)
        change.subject = row["id"]
        await change.acting.record(conn, "ingest_key.created", str(key.row["id"]))
    return row, key


async def update_stream(change: Change, *, stream_id: str, patch: StreamPatch) -> dict[str, Any]:
    """Change a stream's settings (`patch_stream`) as the change."""
    async with change as conn:
        return await patch_stream(conn, change.scope, stream_id=stream_id, patch=patch)


async def delete_stream(change: Change, *, stream_id: str) -> None:
    """Delete a stream (`remove_stream`) as the change."""
    async with change as conn:
        await remove_stream(conn, change.scope, stream_id=stream_id)


async def create_ingest_key(change: Change, *, stream_id: str, name: str) -> NewIngestKey:
    """Another ingest key for a stream (`add_ingest_key`) as the change."""
    async with change as conn:
        key = await add_ingest_key(conn, change.scope, stream_id=stream_id, name=name)
        change.subject = key.row["id"]
    return key


async def revoke_ingest_key(change: Change, *, stream_id: str, key_id: str) -> None:
    """Revoke an ingest key (`end_ingest_key`) as the change."""
    async with change as conn:
        await end_ingest_key(conn, change.scope, stream_id=stream_id, key_id=key_id)


async def ingest_key_stream(conn: Conn, key: str) -> tuple[OrgScope, str] | None:
    """The organization and stream of a live ingest key, or None."""
    if not key.startswith(INGEST_KEY_PREFIX) or len(key) > 200:
        return None
    cur = await conn.execute(queries["authenticate_stream_key"], {"key_hash": hash_key(key)})
    row = await cur.fetchone()
    if row is None:
        return None
    return OrgScope(row["organization_id"]), row["stream_id"]
