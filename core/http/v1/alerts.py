"""`/v1/alerts`: what went wrong (dead deliveries), one open alert per subject."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from core.http.access import AuditedRoute, ChangeDep
from core.http.deps import NowDep, ServicesDep
from core.http.v1.auth import ScopeDep, needs
from core.http.v1.shared import Page, problems
from core.owner import alerts
from core.platform.pagination import DEFAULT_LIMIT, MAX_LIMIT, decode_cursor, encode_cursor
from core.platform.vocabulary import AlertKind, AlertStatus

router = APIRouter(tags=["alerts"], responses=problems(401, 503), route_class=AuditedRoute)


class Alert(BaseModel):
    """An alert; while open, each new occurrence of its subject counts on it."""

    id: str
    kind: AlertKind
    subject: str = Field(
        description="the destination (the form, for acknowledgement emails); the submission "
        "for `storage.stuck`"
    )
    status: AlertStatus
    occurrences: int
    detail: str | None
    last_delivery: str | None
    first_at: datetime
    last_at: datetime
    acknowledged_at: datetime | None
    resolved_at: datetime | None = Field(
        description="when a later delivery to its subject was sent, which resolved it"
    )
    resolved_by: str | None = Field(description="the delivery that resolved it")
    subject_name: str | None = Field(description="the destination's (or form's) name")


@router.get("/alerts", dependencies=[needs("read")], responses=problems(422))
async def list_alerts(
    scope: ScopeDep,
    services: ServicesDep,
    status: AlertStatus | None = None,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
) -> Page[Alert]:
    """The organization's alerts, newest first."""
    position = decode_cursor(cursor)
    before = str(position[0]) if position else None
    async with services.db.scoped(scope) as conn:
        rows = await alerts.list_alerts(conn, scope, status=status, before=before, limit=limit + 1)
    more = len(rows) > limit
    rows = rows[:limit]
    return Page[Alert](
        data=[Alert(**row) for row in rows],
        next_cursor=encode_cursor([rows[-1]["id"]]) if more else None,
    )


@router.post(
    "/alerts/{alert_id}/ack",
    dependencies=[needs("operate", "alert.acknowledged")],
    responses=problems(404, 422),
)
async def acknowledge_alert(change: ChangeDep, alert_id: str, now: NowDep) -> dict[str, Any]:
    """Acknowledge an alert; the next dead delivery of its subject opens a new one."""
    return await alerts.acknowledge_alert(change, alert_id, now=now)
