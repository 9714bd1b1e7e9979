"""Alerts (open ones, acknowledge) and the organization's recent events."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from core.http.access import AuditedRoute, ChangeDep
from core.http.dashboard.pages import CheckedForm, SessionDep, page_needs, see_other
from core.http.dashboard.shared import page
from core.http.deps import ServicesDep
from core.owner import alerts, events
from core.platform.clock import utcnow

router = APIRouter(prefix="/app", include_in_schema=False, route_class=AuditedRoute)


@router.get("/alerts", dependencies=[page_needs("read")])
async def alerts_list(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    async with services.db.scoped(session.scope) as conn:
        found = await alerts.list_alerts(conn, session.scope, status="open", before=None, limit=100)
    return await page(
        request,
        services,
        session,
        "alerts.html",
        title="Alerts",
        active="/app/alerts",
        alerts=found,
    )


@router.post(
    "/alerts/{alert_id}/acknowledge", dependencies=[page_needs("operate", "alert.acknowledged")]
)
async def alert_ack(change: ChangeDep, _posted: CheckedForm, alert_id: str) -> Response:
    await alerts.acknowledge_alert(change, alert_id, now=utcnow())
    return see_other("/app/alerts")


@router.get("/events", dependencies=[page_needs("read")])
async def events_list(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    async with services.db.scoped(session.scope) as conn:
        found = await events.recent_events(conn, session.scope, limit=200)
    return await page(
        request,
        services,
        session,
        "events.html",
        title="Events",
        active="/app/events",
        events=found,
    )
