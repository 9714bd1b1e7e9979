"""Streams: the list (and a new stream), one stream with its routes, schema versions,
ingest keys and recent events, and one event with its data, what it broke of the schema and
its delivery lines (release from quarantine, erase)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from starlette.responses import Response

from core.http.access import AuditedRoute, ChangeDep, audit_as
from core.http.dashboard.pages import CheckedForm, SessionDep, page_needs, see_other
from core.http.dashboard.shared import delivery_state, detail_words, page, reason_words
from core.http.deps import ServicesDep
from core.owner.destinations import list_destinations
from core.owner.roles import may
from core.platform.clock import utcnow
from core.platform.errors import InvalidInput
from core.streams import events, streams
from core.streams.routes import list_stream_routes
from core.streams.schemas import list_stream_schemas
from core.streams.streams import NewIngestKey, StreamFields

router = APIRouter(prefix="/app", include_in_schema=False, route_class=AuditedRoute)


async def _key_shown_once(
    request: Request, services: ServicesDep, session: SessionDep, key: NewIngestKey
) -> Response:
    return await page(
        request,
        services,
        session,
        "stream_key.html",
        title="Ingest key",
        active="/app/streams",
        key=key.row,
        secret=key.secret,
    )


@router.get("/streams", dependencies=[page_needs("read")])
async def streams_list(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    async with services.db.scoped(session.scope) as conn:
        found = await streams.list_streams(conn, session.scope, after=None, limit=200)
    return await page(
        request,
        services,
        session,
        "streams.html",
        title="Streams",
        active="/app/streams",
        streams=found,
    )


@router.post("/streams", dependencies=[page_needs("configure", "stream.created")])
async def stream_create(
    change: ChangeDep,
    request: Request,
    services: ServicesDep,
    session: SessionDep,
    posted: CheckedForm,
) -> Response:
    fields = StreamFields(name=str(posted.get("name") or "Stream")[:200] or "Stream")
    _, key = await streams.create_stream(change, fields=fields)
    return await _key_shown_once(request, services, session, key)


@router.get("/streams/{stream_id}", dependencies=[page_needs("read")])
async def stream_page(
    request: Request, services: ServicesDep, session: SessionDep, stream_id: str
) -> Response:
    async with services.db.scoped(session.scope) as conn:
        stream = await streams.get_stream(conn, session.scope, stream_id=stream_id)
        keys = await streams.list_ingest_keys(
            conn, session.scope, stream_id=stream_id, after=None, limit=200
        )
        recent = await events.list_events(
            conn, session.scope, stream_id=stream_id, type=None, status=None, before=None, limit=50
        )
        routes = await list_stream_routes(
            conn, session.scope, stream_id=stream_id, after=None, limit=200
        )
        versions = await list_stream_schemas(
            conn, session.scope, stream_id=stream_id, after=None, limit=200
        )
        targets = await list_destinations(conn, session.scope, after=None, limit=500)
    names = {d["id"]: d["name"] for d in targets}
    return await page(
        request,
        services,
        session,
        "stream.html",
        title=stream["name"],
        active="/app/streams",
        stream=stream,
        keys=keys,
        events=recent,
        routes=[{**r, "destination_name": names.get(r["destination_id"])} for r in routes],
        versions=_in_use(versions),
    )


def _in_use(versions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Versions newest first, each marked `in_use` when it is the owner's latest for its
    event type (the one events of that type are checked against, `core.schemas.versions`)."""
    latest: dict[str | None, int] = {}
    for row in versions:
        if row["source"] == "manual":
            latest[row["event_type"]] = row["version"]
    return [
        {**row, "in_use": latest.get(row["event_type"]) == row["version"]}
        for row in reversed(versions)
    ]


@router.post(
    "/streams/{stream_id}/keys", dependencies=[page_needs("configure", "ingest_key.created")]
)
async def key_create(
    change: ChangeDep,
    request: Request,
    services: ServicesDep,
    session: SessionDep,
    posted: CheckedForm,
    stream_id: str,
) -> Response:
    name = str(posted.get("name") or "ingest").strip()[:200] or "ingest"
    key = await streams.create_ingest_key(change, stream_id=stream_id, name=name)
    return await _key_shown_once(request, services, session, key)


@router.post(
    "/streams/{stream_id}/keys/{key_id}/revoke",
    dependencies=[page_needs("configure", "ingest_key.revoked")],
)
async def key_revoke(
    change: ChangeDep, _posted: CheckedForm, stream_id: str, key_id: str
) -> Response:
    await streams.revoke_ingest_key(change, stream_id=stream_id, key_id=key_id)
    return see_other(f"/app/streams/{stream_id}")


def _line(row: dict[str, Any]) -> dict[str, Any]:
    state, css = delivery_state(row)
    return {
        **row,
        "state": state,
        "css": css,
        "detail_words": detail_words(row["last_detail"]),
        "reason_words": reason_words(row["reason"]),
    }


@router.get(
    "/streams/{stream_id}/events/{event_id}",
    dependencies=[page_needs("read")],
)
async def event_page(
    request: Request, services: ServicesDep, session: SessionDep, stream_id: str, event_id: str
) -> Response:
    async with services.db.scoped(session.scope) as conn:
        stream = await streams.get_stream(conn, session.scope, stream_id=stream_id)
        event, lines = await events.get_event(
            conn, session.scope, stream_id=stream_id, event_id=event_id
        )
    kept = None
    if may(session.role, "read_values"):
        kept = event["data"]
        audit_as(request, action="stream_event.read")
    data = None if kept is None else json.dumps(kept, indent=2, ensure_ascii=False)
    return await page(
        request,
        services,
        session,
        "stream_event.html",
        title=f"Event {event_id}",
        active="/app/streams",
        stream=stream,
        event=event,
        data=data,
        lines=[_line(row) for row in lines],
    )


@router.post(
    "/streams/{stream_id}/events/{event_id}/release",
    dependencies=[page_needs("operate", "stream_event.released")],
)
async def event_release(
    change: ChangeDep, services: ServicesDep, _posted: CheckedForm, stream_id: str, event_id: str
) -> Response:
    await events.release_event(
        change, services, stream_id=stream_id, event_id=event_id, now=utcnow()
    )
    return see_other(f"/app/streams/{stream_id}/events/{event_id}")


@router.post(
    "/streams/{stream_id}/events/{event_id}/erase",
    dependencies=[page_needs("operate", "stream_event.erased")],
)
async def event_erase(
    change: ChangeDep, posted: CheckedForm, stream_id: str, event_id: str
) -> Response:
    if posted.get("confirm") != "erase":
        raise InvalidInput("tick the box to confirm the erase", [])
    await events.erase_event(change, stream_id=stream_id, event_id=event_id, now=utcnow())
    return see_other(f"/app/streams/{stream_id}/events/{event_id}")
