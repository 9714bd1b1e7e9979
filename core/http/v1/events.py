"""`/v1/events`: the organization's event stream, ascending ids."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, Field

from core.http.access import AuditedRoute
from core.http.deps import ServicesDep
from core.http.v1.auth import ScopeDep, needs
from core.http.v1.shared import REPLICA_READ, Page, problems, replica_lag_headers
from core.owner.events import list_events
from core.platform.errors import InvalidInput
from core.platform.pagination import DEFAULT_LIMIT, MAX_LIMIT, decode_cursor, encode_cursor

router = APIRouter(tags=["events"], responses=problems(401, 503), route_class=AuditedRoute)


class Event(BaseModel):
    """One event of the organization's stream."""

    id: int
    type: str = Field(description="e.g. `submission.received`, `delivery.dead`")
    subject: str | None = Field(description="the id of what it is about")
    data: dict[str, Any]
    created_at: datetime


class EventPage(Page[Event]):
    """One page of the event stream."""


def _start(cursor: str | None, after: int | None) -> int:
    """The id the page starts after: the cursor's, else `after`'s, else 0."""
    position = decode_cursor(cursor)
    if position is None:
        return after or 0
    if len(position) != 1 or not isinstance(position[0], int) or position[0] < 0:
        raise InvalidInput("malformed cursor", [{"field": "cursor", "message": "malformed"}])
    return position[0]


@router.get("/events", dependencies=[needs("read")], responses={**problems(422), **REPLICA_READ})
async def events_list(
    response: Response,
    scope: ScopeDep,
    services: ServicesDep,
    cursor: str | None = None,
    after: Annotated[
        int | None, Query(ge=0, description="an event id; the older form of `cursor`")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
) -> EventPage:
    """Events oldest first; pass `next_cursor` back as `cursor` for the next page. `after`
    (an event id) starts after that event: poll with the last id you saw."""
    start = _start(cursor, after)
    response.headers.update(replica_lag_headers(await services.db.replica_lag()))
    async with services.db.reading(scope) as conn:
        page = await list_events(conn, scope, after=start, limit=limit + 1)
    more = len(page) > limit
    page = page[:limit]
    return EventPage(
        data=[Event(**row) for row in page],
        next_cursor=encode_cursor([page[-1]["id"]]) if more else None,
    )
