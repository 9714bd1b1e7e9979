"""Alerts (open ones, acknowledge), the notices the owner was sent and where they go (the
notification addresses and the notice destination: `PATCH /v1/organization`'s use case),
and the organization's recent events."""

from __future__ import annotations

import re

from fastapi import APIRouter, Request
from pydantic import ValidationError
from starlette.responses import Response

from core.http.access import AuditedRoute, ChangeDep
from core.http.dashboard.pages import CheckedForm, SessionDep, page_needs, see_other
from core.http.dashboard.shared import page
from core.http.deps import ServicesDep
from core.owner import alerts, destinations, events, notifications
from core.owner.notifications import NOTICE_DESTINATION_TYPES, NotifySettings
from core.platform.clock import utcnow
from core.platform.errors import invalid_input

router = APIRouter(prefix="/app", include_in_schema=False, route_class=AuditedRoute)
# The notices the page lists, newest first.
NOTICES_SHOWN = 20
_SEPARATORS = re.compile(r"[\s,;]+")


@router.get("/alerts", dependencies=[page_needs("read")])
async def alerts_list(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    scope = session.scope
    async with services.db.scoped(scope) as conn:
        found = await alerts.list_alerts(conn, scope, status="open", before=None, limit=100)
        notices = await notifications.recent_notices(conn, scope, limit=NOTICES_SHOWN)
        settings = await notifications.notice_settings(conn, scope)
        dests = await destinations.list_destinations(conn, scope, after=None, limit=500)
    return await page(
        request,
        services,
        session,
        "alerts.html",
        title="Alerts",
        active="/app/alerts",
        alerts=found,
        notices=notices,
        notify=settings["notify"],
        notify_destination=settings["notify_destination"],
        notice_destinations=[d for d in dests if d["type"] in NOTICE_DESTINATION_TYPES],
    )


@router.post("/alerts/notices", dependencies=[page_needs("configure", "organization.updated")])
async def notices_update(change: ChangeDep, posted: CheckedForm) -> Response:
    addresses = [a for a in _SEPARATORS.split(str(posted.get("notify") or "")) if a]
    destination = str(posted.get("notify_destination") or "") or None
    try:
        settings = NotifySettings.model_validate(
            {"notify": addresses, "notify_destination": destination}
        )
    except ValidationError as exc:
        raise invalid_input(exc) from None
    await notifications.update_organization(change, settings=settings)
    return see_other("/app/alerts#notices")


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
