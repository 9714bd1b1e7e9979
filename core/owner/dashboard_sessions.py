"""Dashboard sessions: signed in with an API key, held server-side, 12 hours idle at most.

The cookie carries only a random id; the database keeps its SHA-256, so a leaked table
cannot be replayed as cookies. A session ends when its key is revoked.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from core.owner.organizations import authenticate_key
from core.owner.roles import Actor
from core.platform.db import Conn
from core.platform.queries import queries
from core.platform.scope import OrgScope

IDLE_LIMIT = timedelta(hours=12)


@dataclass(frozen=True, slots=True)
class DashboardSession:
    """A signed-in dashboard visitor: whose data they see, who they act as, and their
    forms' CSRF token."""

    scope: OrgScope
    organization_name: str
    csrf_token: str
    actor: Actor


def _hash(session_id: str) -> bytes:
    return hashlib.sha256(session_id.encode()).digest()


async def open_session(conn: Conn, api_key: str | None, *, now: datetime) -> str:
    """Sign in with an API key; return the new session id for the cookie."""
    scope, key = await authenticate_key(conn, api_key)
    session_id = secrets.token_urlsafe(32)
    await conn.execute(
        queries["insert_dashboard_session"],
        {
            "id_hash": _hash(session_id),
            "organization_id": scope.organization_id,
            "api_key_id": key.id,
            "csrf_token": secrets.token_urlsafe(32),
            "now": now,
        },
    )
    return session_id


async def load_session(
    conn: Conn, session_id: str | None, *, now: datetime
) -> DashboardSession | None:
    """The live session for a cookie value, marked seen; None when absent, idle or revoked."""
    if not session_id or len(session_id) > 100:
        return None
    cur = await conn.execute(
        queries["touch_dashboard_session"],
        {"id_hash": _hash(session_id), "now": now, "idle_seconds": IDLE_LIMIT.total_seconds()},
    )
    row = await cur.fetchone()
    if row is None:
        return None
    return DashboardSession(
        OrgScope(row["organization_id"]),
        row["organization_name"],
        row["csrf_token"],
        session_actor(row),
    )


def session_actor(row: dict[str, Any]) -> Actor:
    """Who a session acts as: the API key it was opened with, with the key's role."""
    return Actor("key", row["api_key_id"], row["api_key_name"], row["api_key_role"])


async def close_session(conn: Conn, session_id: str) -> None:
    """Sign out: the session row is deleted at once."""
    await conn.execute(queries["delete_dashboard_session"], {"id_hash": _hash(session_id)})


async def forget_idle_sessions(conn: Conn, *, now: datetime) -> int:
    """Delete the sessions idle past the limit (the retention tick's sweep); how many."""
    cur = await conn.execute(
        queries["delete_idle_dashboard_sessions"],
        {"now": now, "idle_seconds": IDLE_LIMIT.total_seconds()},
    )
    return cur.rowcount
