"""Alerts: one open alert per (organization, kind, subject) counting its occurrences, resolved
by the next delivery sent to its subject."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from core.owner.changes import Change
from core.platform.db import Conn
from core.platform.errors import NotFound
from core.platform.ids import new_id
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.platform.vocabulary import AlertKind

if TYPE_CHECKING:
    pass


async def raise_alert(
    conn: Conn,
    *,
    organization_id: str,
    kind: AlertKind,
    subject_id: str,
    detail: str,
    delivery_id: str | None,
    now: datetime,
) -> int:
    """Open an alert or add an occurrence to the open one; returns the occurrence count."""
    cur = await conn.execute(
        queries["raise_alert"],
        {
            "id": new_id("alr"),
            "organization_id": organization_id,
            "kind": kind,
            "subject_id": subject_id,
            "detail": detail,
            "last_delivery_id": delivery_id,
            "now": now,
        },
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row["occurrences"])


def _public(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "kind": row["kind"],
        "subject": row["subject_id"],
        "status": row["status"],
        "occurrences": row["occurrences"],
        "detail": row["detail"],
        "last_delivery": row["last_delivery_id"],
        "first_at": row["first_at"],
        "last_at": row["last_at"],
        "acknowledged_at": row["acknowledged_at"],
        "resolved_at": row["resolved_at"],
        "resolved_by": row["resolved_by_delivery_id"],
        "subject_name": row.get("subject_name"),
        "subject_type": row.get("subject_type"),
        "last_delivery_submission": row.get("last_delivery_submission"),
    }


@scoped
async def list_alerts(
    conn: Conn, scope: OrgScope, *, status: str | None, before: str | None, limit: int
) -> list[dict[str, Any]]:
    """A page of the organization's alerts, newest first."""
    cur = await conn.execute(
        queries["list_alerts"],
        {
            "organization_id": scope.organization_id,
            "status": status,
            "before": before,
            "limit": limit,
        },
    )
    return [_public(row) for row in await cur.fetchall()]


@scoped
async def acknowledge(
    conn: Conn, scope: OrgScope, alert_id: str, *, now: datetime
) -> dict[str, Any]:
    """Acknowledge an alert; a later dead delivery opens a new one."""
    cur = await conn.execute(
        queries["ack_alert"],
        {"id": alert_id, "organization_id": scope.organization_id, "now": now},
    )
    row = await cur.fetchone()
    if row is None:
        raise NotFound(f"no alert {alert_id}")
    return _public(row)


async def acknowledge_alert(change: Change, alert_id: str, *, now: datetime) -> dict[str, Any]:
    """Acknowledge an alert (`acknowledge`) as the change."""
    async with change as conn:
        return await acknowledge(conn, change.scope, alert_id, now=now)
