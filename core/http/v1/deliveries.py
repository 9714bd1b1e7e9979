"""`/v1/deliveries`, retry by hand, and `POST /v1/destinations/{id}/test`."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from core.destinations import sample
from core.destinations.http import shared_client
from core.http.deps import NowDep, ServicesDep
from core.http.v1.auth import ScopeDep
from core.http.v1.shared import Page, problems
from core.outbox import deliveries
from core.owner.destinations import DestinationType
from core.platform.pagination import DEFAULT_LIMIT, MAX_LIMIT, decode_cursor, encode_cursor
from core.platform.vocabulary import DeliveryKind, DeliveryStatus

router = APIRouter(tags=["deliveries"], responses=problems(401, 503))


class Delivery(BaseModel):
    """A delivery as listed; `GET /v1/deliveries/{id}` adds `max_attempts` and `history`."""

    id: str
    submission: str | None = Field(description="null for a digest or a stream event")
    destination: str | None = Field(description="null for an acknowledgement email")
    kind: DeliveryKind
    channel: DestinationType
    status: DeliveryStatus
    reason: str | None = Field(description="why it ended unsent, e.g. `http_404`")
    attempts: int
    next_attempt_at: datetime
    last_detail: str | None = Field(description="the last attempt's outcome, e.g. `http_503`")
    created_at: datetime
    sent_at: datetime | None


@router.get("/deliveries", responses=problems(422))
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


@router.get("/deliveries/{delivery_id}", responses=problems(404, 422))
async def get_delivery(delivery_id: str, scope: ScopeDep, services: ServicesDep) -> dict[str, Any]:
    """One delivery with its attempts."""
    async with services.db.scoped(scope) as conn:
        return await deliveries.get_delivery(conn, scope, delivery_id)


@router.post("/deliveries/{delivery_id}/retry", responses=problems(404, 409, 422))
async def retry_delivery(
    delivery_id: str, scope: ScopeDep, services: ServicesDep, now: NowDep
) -> dict[str, Any]:
    """Queue a failed, dead or skipped delivery again now (same id and snapshot)."""
    async with services.db.scoped(scope) as conn:
        return await deliveries.retry_delivery(conn, scope, delivery_id, now=now)


@router.post(
    "/destinations/{destination_id}/test", tags=["destinations"], responses=problems(404, 422)
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
