"""The organization's event stream: append-only rows with ascending ids."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb

from core.platform.db import Conn
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped


@scoped
async def record_event(
    conn: Conn,
    scope: OrgScope,
    *,
    type: str,
    subject_id: str | None,
    data: Mapping[str, Any],
    now: datetime | None = None,
) -> int:
    """Append an event (inside the caller's transaction); returns its id."""
    cur = await conn.execute(
        queries["insert_event"],
        {
            "organization_id": scope.organization_id,
            "type": type,
            "subject_id": subject_id,
            "data": Jsonb(dict(data)),
            "now": now,
        },
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row["id"])


@scoped
async def list_events(
    conn: Conn, scope: OrgScope, *, after: int, limit: int
) -> list[dict[str, Any]]:
    """Up to `limit` events with ids above `after`, oldest first."""
    cur = await conn.execute(
        queries["list_events"],
        {"organization_id": scope.organization_id, "after": after, "limit": limit},
    )
    return [
        {
            "id": row["id"],
            "type": row["type"],
            "subject": row["subject_id"],
            "data": row["data"],
            "created_at": row["created_at"],
        }
        for row in await cur.fetchall()
    ]


@scoped
async def recent_events(conn: Conn, scope: OrgScope, *, limit: int) -> list[dict[str, Any]]:
    """The organization's newest `limit` events, newest first."""
    cur = await conn.execute(
        queries["recent_events"], {"organization_id": scope.organization_id, "limit": limit}
    )
    return [
        {
            "id": row["id"],
            "type": row["type"],
            "subject": row["subject_id"],
            "data": row["data"],
            "created_at": row["created_at"],
        }
        for row in await cur.fetchall()
    ]
