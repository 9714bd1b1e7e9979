"""Stored events as their owner reads them: lists by type and status, one event with its
deliveries, the owner's release from quarantine, the owner's erase and the retention
tick's."""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import partial
from typing import Any

from psycopg.types.json import Jsonb

from core.outbox.wakeup import wake_deliveries
from core.owner.changes import Change
from core.owner.plans import PLANS
from core.platform.db import Conn
from core.platform.errors import AlreadyReleased, NotFound, ValuesErased, ValuesExpired
from core.platform.ids import new_id
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.platform.services import Services
from core.platform.vocabulary import DeliverySkipReason, EraseReason

_SKIP_REASONS: dict[EraseReason, DeliverySkipReason] = {
    "requested": "values_erased",
    "expired": "values_expired",
}


@scoped
async def list_events(
    conn: Conn,
    scope: OrgScope,
    *,
    stream_id: str,
    type: str | None,
    status: str | None,
    before: str | None,
    limit: int,
) -> list[dict[str, Any]]:
    """A live stream's events, newest first, before the id `before`."""
    params = {"id": stream_id, "organization_id": scope.organization_id}
    if await (await conn.execute(queries["get_stream"], params)).fetchone() is None:
        raise NotFound(f"no stream {stream_id}")
    cur = await conn.execute(
        queries["list_stream_events"],
        {
            "stream_id": stream_id,
            "organization_id": scope.organization_id,
            "type": type,
            "status": status,
            "before": before,
            "limit": limit,
        },
    )
    return await cur.fetchall()


@scoped
async def get_event(
    conn: Conn, scope: OrgScope, *, stream_id: str, event_id: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """One event of a stream, with its deliveries."""
    params = {"id": event_id, "stream_id": stream_id, "organization_id": scope.organization_id}
    event = await (await conn.execute(queries["get_stream_event"], params)).fetchone()
    if event is None:
        raise NotFound(f"no event {event_id}")
    cur = await conn.execute(
        queries["stream_event_deliveries"],
        {"event_id": event_id, "organization_id": scope.organization_id},
    )
    return event, await cur.fetchall()


@scoped
async def set_event_accepted(
    conn: Conn, scope: OrgScope, *, stream_id: str, event_id: str, now: datetime
) -> int:
    """Release a quarantined event: `accepted` (with an accepted event's retention), one
    delivery per live route that takes accepted events of its type; how many it planned.
    Once only (AlreadyReleased after, or for an event accepted from the start); an erased
    or expired event has nothing to deliver."""
    params = {"id": event_id, "stream_id": stream_id, "organization_id": scope.organization_id}
    row = await (await conn.execute(queries["lock_stream_event_for_release"], params)).fetchone()
    if row is None:
        raise NotFound(f"no event {event_id}")
    if row["erased_at"] is not None:
        raise ValuesErased("the event's data was erased: there is nothing to deliver")
    if row["erase_at"] is not None and row["erase_at"] <= now:
        raise ValuesExpired("the event is past its retention: there is nothing to deliver")
    if row["status"] == "accepted":
        raise AlreadyReleased(
            "this event was already released"
            if row["released_at"] is not None
            else "this event is accepted: its routes already planned its deliveries"
        )
    cur = await conn.execute(
        queries["stream_release_routes"],
        {"stream_id": stream_id, "organization_id": scope.organization_id, "type": row["type"]},
    )
    planned = [{"id": new_id("dlv"), "route_id": r["route_id"]} for r in await cur.fetchall()]
    days = PLANS[row["plan"]].retention_for("accepted", row["retention_days"])
    done = await (
        await conn.execute(
            queries["release_stream_event"],
            {
                **params,
                "from_status": row["status"],
                "from_reason": row["reason"],
                "deliveries": Jsonb(planned),
                "erase_at": None if days is None else row["received_at"] + timedelta(days=days),
                "now": now,
            },
        )
    ).fetchone()
    assert done is not None
    return int(done["deliveries"])


async def release_event(
    change: Change, services: Services, *, stream_id: str, event_id: str, now: datetime
) -> int:
    """Release a quarantined event (`set_event_accepted`) as the change; the deliverers wake
    once it has committed, when it planned any."""
    async with change as conn:
        planned = await set_event_accepted(
            conn, change.scope, stream_id=stream_id, event_id=event_id, now=now
        )
        if planned:
            change.after_commit(partial(wake_deliveries, services))
    return planned


async def erase_events(conn: Conn, *, ids: list[str], now: datetime, reason: EraseReason) -> int:
    """Erase the data of `ids` (locked by the caller) and every trace of it; how many were
    erased now."""
    cur = await conn.execute(
        queries["erase_stream_events"],
        {"ids": ids, "now": now, "reason": reason, "skip_reason": _SKIP_REASONS[reason]},
    )
    return len(await cur.fetchall())


@scoped
async def erase_one_event(
    conn: Conn, scope: OrgScope, *, stream_id: str, event_id: str, now: datetime
) -> None:
    """The owner's erase of one event (erasing an erased event again changes nothing)."""
    params = {"id": event_id, "stream_id": stream_id, "organization_id": scope.organization_id}
    if await (await conn.execute(queries["lock_stream_event"], params)).fetchone() is None:
        raise NotFound(f"no event {event_id}")
    await erase_events(conn, ids=[event_id], now=now, reason="requested")


async def erase_event(change: Change, *, stream_id: str, event_id: str, now: datetime) -> None:
    """The owner's erase of one event (`erase_one_event`) as the change."""
    async with change as conn:
        await erase_one_event(conn, change.scope, stream_id=stream_id, event_id=event_id, now=now)


async def expire_events(conn: Conn, *, now: datetime, limit: int) -> int:
    """One retention batch: up to `limit` events past their retention, erased (as owner)."""
    cur = await conn.execute(queries["expired_stream_events"], {"now": now, "limit": limit})
    ids = [row["id"] for row in await cur.fetchall()]
    if not ids:
        return 0
    return await erase_events(conn, ids=ids, now=now, reason="expired")
