"""`/v1/deliveries`, retry by hand, and `POST /v1/destinations/{id}/test`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Path, Query
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from core.destinations import sample
from core.destinations.http import shared_client
from core.http.access import AuditedRoute, ChangeDep
from core.http.deps import NowDep, ServicesDep
from core.http.v1.auth import ScopeDep, needs
from core.http.v1.shared import Page, problems, read_one
from core.outbox import deliveries, replays
from core.outbox.replays import ReplayFilter
from core.owner.destinations import DestinationType
from core.platform.ids import id_pattern
from core.platform.pagination import DEFAULT_LIMIT, MAX_LIMIT, decode_cursor, encode_cursor
from core.platform.vocabulary import DeliveryKind, DeliveryStatus

router = APIRouter(tags=["deliveries"], responses=problems(401, 503), route_class=AuditedRoute)


class Delivery(BaseModel):
    """A delivery as listed; `GET /v1/deliveries/{id}` adds `max_attempts` and `history`."""

    id: str
    submission: str | None = Field(description="null for a digest or a stream event")
    destination: str | None = Field(description="null for an acknowledgement email")
    kind: DeliveryKind
    channel: DestinationType
    status: DeliveryStatus
    reason: str | None = Field(
        description="why it ended unsent, a class such as `http_404` (never the receiver's words)"
    )
    attempts: int
    next_attempt_at: datetime
    last_detail: str | None = Field(
        description="the last attempt's outcome, a class such as `http_503` or `timeout`"
    )
    created_at: datetime
    sent_at: datetime | None


@router.get("/deliveries", dependencies=[needs("read")], responses=problems(422))
async def list_deliveries(
    scope: ScopeDep,
    services: ServicesDep,
    status: DeliveryStatus | None = None,
    destination: str | None = None,
    submission: str | None = None,
    cursor: str | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
) -> Page[Delivery]:
    """The organization's deliveries, newest first."""
    position = decode_cursor(cursor)
    before = str(position[0]) if position else None
    async with services.db.scoped(scope) as conn:
        rows = await deliveries.list_deliveries(
            conn,
            scope,
            status=status,
            destination=destination,
            submission=submission,
            before=before,
            limit=limit + 1,
        )
    more = len(rows) > limit
    rows = rows[:limit]
    return Page[Delivery](
        data=[Delivery(**row) for row in rows],
        next_cursor=encode_cursor([rows[-1]["id"]]) if more else None,
    )


@router.get(
    "/deliveries/{delivery_id}",
    dependencies=[needs("read_values", "delivery.read")],
    responses=problems(404, 422),
)
async def get_delivery(delivery_id: str, scope: ScopeDep, services: ServicesDep) -> dict[str, Any]:
    """One delivery with its attempts (each with an excerpt of the receiver's answer, which
    may quote the values)."""
    return await read_one(services, scope, deliveries.get_delivery, delivery_id)


@router.post(
    "/deliveries/{delivery_id}/retry",
    dependencies=[needs("operate", "delivery.retried")],
    responses=problems(404, 409, 422),
)
async def retry_delivery(
    change: ChangeDep, delivery_id: str, services: ServicesDep, now: NowDep
) -> dict[str, Any]:
    """Queue a failed, dead or skipped delivery again now (same id and body), to its
    destination as it is now."""
    return await deliveries.retry_delivery(change, services, delivery_id, now=now)


class Replay(BaseModel):
    """A bulk replay and where the deliveries it queued stand now."""

    id: str
    filter: dict[str, Any] = Field(description="the filter as applied (`until` filled in)")
    total: int = Field(description="deliveries queued")
    per_second: int = Field(description="how many of them come due each second")
    created_at: datetime
    queued: int = Field(description="waiting for their turn, being sent, or retrying")
    sent: int
    failed: int = Field(description="dead again")
    skipped: int = Field(description="skipped since (e.g. erased meanwhile)")


class ReplayCount(BaseModel):
    """What a replay would queue (`dry_run`)."""

    count: int
    limit: int = Field(description="the most one replay queues")
    filter: dict[str, Any]


@router.post(
    "/deliveries/replay",
    dependencies=[needs("operate", "replay.started", status=202)],
    status_code=202,
    response_model=Replay,
    responses={
        **problems(404, 422),
        200: {"model": ReplayCount, "description": "the count (`dry_run`)"},
    },
)
async def replay_deliveries(
    change: ChangeDep, replay: ReplayFilter, scope: ScopeDep, services: ServicesDep, now: NowDep
) -> Replay | JSONResponse:
    """Queue again, at a bounded rate, the dead (or skipped, failed) deliveries a filter
    matches, each with its accepted body, to its destination as it is now; with `dry_run`,
    only count them (200)."""
    if replay.dry_run:
        async with services.db.scoped(scope) as conn:
            counted = await replays.count_replay(conn, scope, replay, now=now)
        return JSONResponse(jsonable_encoder(ReplayCount(**counted)), status_code=200)
    return Replay(**await replays.start_replay(change, services, replay, now=now))


@router.get("/replays/{replay_id}", dependencies=[needs("read")], responses=problems(404, 422))
async def get_replay(
    replay_id: Annotated[str, Path(pattern=id_pattern("rpl"))],
    scope: ScopeDep,
    services: ServicesDep,
) -> Replay:
    """A replay's progress."""
    return Replay(**await read_one(services, scope, replays.get_replay, replay_id))


@router.post(
    "/destinations/{destination_id}/test",
    dependencies=[needs("operate", "destination.tested")],
    tags=["destinations"],
    responses=problems(404, 422),
)
async def test_destination(
    destination_id: str, scope: ScopeDep, services: ServicesDep, now: NowDep
) -> dict[str, Any]:
    """Send a sample submission through the destination now; the result is not stored."""
    # The send happens outside any transaction: the lookup's connection is released first.
    async with services.db.scoped(scope) as conn:
        found = await sample.destination_for_test(conn, scope, destination_id)
    return await sample.send_sample(
        found, settings=services.settings, http=shared_client(), now=now
    )
