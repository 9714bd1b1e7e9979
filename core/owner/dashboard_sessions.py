"""Dashboard sessions: a member signed in to one of their organizations, held server-side,
12 hours idle at most (less, and an absolute limit, under the organization's policy).

The cookie carries only a random id; the database keeps its SHA-256, so a leaked table
cannot be replayed as cookies. A session lives only while its member belongs to its
organization: removing the member ends it at their next request, and a role changed is
the role of that request. An organization requiring single sign-on refuses a session its
provider did not open (but a break-glass owner's).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from core.owner.changes import Change
from core.owner.credentials import new_token, token_hash
from core.owner.roles import Actor
from core.platform.db import Conn
from core.platform.errors import NotFound
from core.platform.ids import new_id
from core.platform.queries import queries
from core.platform.scope import OrgScope
from core.platform.vocabulary import Role

IDLE_LIMIT = timedelta(hours=12)
# How often a session opened by single sign-on asks its provider again (core/owner/sso.py).
SSO_RECHECK = timedelta(minutes=5)
USER_AGENT_CHARS = 300


@dataclass(frozen=True, slots=True)
class DashboardSession:
    """A signed-in member: the organization they see, their role in it, the other
    organizations they may switch to, and their forms' CSRF token."""

    id: str
    scope: OrgScope
    organization_name: str
    csrf_token: str
    member_id: str
    email: str
    role: Role
    organizations: list[dict[str, str]]
    # The organization requires two-factor sign-in and the member has none yet: every page
    # but setting it up sends them there (docs/sso.md#policies).
    two_factor_missing: bool = False
    # Opened by single sign-on, and its provider is due to be asked again.
    sso_due: bool = False

    @property
    def actor(self) -> Actor:
        """Who a dashboard request acts for: the member, with their role in the
        organization."""
        return Actor("member", self.member_id, self.email, self.role)


async def open_session(
    conn: Conn,
    *,
    member_id: str,
    organization_id: str,
    user_agent: str,
    now: datetime,
    sso_organization_id: str | None = None,
    sso_refresh_token: str | None = None,
) -> str:
    """A new session for a member in one of their organizations; its id, for the cookie.
    A single sign-on names the organization whose provider signed them in and keeps the
    provider's refresh token (core/owner/sso.py)."""
    session_id = new_token()
    await conn.execute(
        queries["insert_dashboard_session"],
        {
            "id": new_id("ses"),
            "id_hash": token_hash(session_id),
            "organization_id": organization_id,
            "member_id": member_id,
            "csrf_token": secrets.token_urlsafe(32),
            "user_agent": user_agent[:USER_AGENT_CHARS],
            "now": now,
            "sso_organization_id": sso_organization_id,
            "sso_refresh_token": sso_refresh_token,
        },
    )
    return session_id


async def load_session(
    conn: Conn, session_id: str | None, *, now: datetime
) -> DashboardSession | None:
    """The live session for a cookie value, marked seen; None when absent, idle, or its
    member no longer belongs to its organization."""
    if not session_id or len(session_id) > 100:
        return None
    cur = await conn.execute(
        queries["touch_dashboard_session"],
        {
            "id_hash": token_hash(session_id),
            "now": now,
            "idle_seconds": IDLE_LIMIT.total_seconds(),
            "sso_due": now - SSO_RECHECK,
        },
    )
    row = await cur.fetchone()
    if row is None:
        return None
    return DashboardSession(
        id=row["id"],
        scope=OrgScope(row["organization_id"]),
        organization_name=row["organization_name"],
        csrf_token=row["csrf_token"],
        member_id=row["member_id"],
        email=row["address"],
        role=row["role"],
        organizations=row["organizations"],
        two_factor_missing=row["two_factor_missing"],
        sso_due=row["sso_due"],
    )


async def switch_organization(conn: Conn, session_id: str, organization_id: str) -> None:
    """Move the session to another organization of its member's; any other is NotFound."""
    cur = await conn.execute(
        queries["switch_session_organization"],
        {"id_hash": token_hash(session_id), "organization_id": organization_id},
    )
    if await cur.fetchone() is None:
        raise NotFound(f"no organization {organization_id}")


async def member_sessions(conn: Conn, member_id: str, *, now: datetime) -> list[dict[str, Any]]:
    """A member's live sessions (id, user agent, organization, times), newest seen first."""
    cur = await conn.execute(
        queries["member_sessions"],
        {"member_id": member_id, "now": now, "idle_seconds": IDLE_LIMIT.total_seconds()},
    )
    return await cur.fetchall()


async def end_member_session(conn: Conn, member_id: str, session: str) -> None:
    """End one of the member's sessions at once; another's, or none, is NotFound."""
    cur = await conn.execute(
        queries["delete_member_session"], {"id": session, "member_id": member_id}
    )
    if await cur.fetchone() is None:
        raise NotFound(f"no session {session}")


async def end_session(change: Change, session_id: str) -> None:
    """End one of the acting member's sessions (across their organizations)."""
    async with change.member_wide() as conn:
        await end_member_session(conn, change.acting.actor.id, session_id)


async def close_session(conn: Conn, session_id: str) -> None:
    """Sign out: the session row is deleted at once."""
    await conn.execute(queries["delete_dashboard_session"], {"id_hash": token_hash(session_id)})


async def forget_idle_sessions(conn: Conn, *, now: datetime) -> int:
    """Delete the sessions idle past the limit (the retention tick's sweep); how many."""
    cur = await conn.execute(
        queries["delete_idle_dashboard_sessions"],
        {"now": now, "idle_seconds": IDLE_LIMIT.total_seconds()},
    )
    return cur.rowcount
