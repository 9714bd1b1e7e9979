"""Reading the organization's event stream: append-only rows with ascending ids.

Events are written by the statement that makes the change they record (a submit, a
release, a delivery's outcome…), inside its transaction; nothing here writes one.
"""

from __future__ import annotations

from typing import Any

from core.platform.db import Conn
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped


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
