"""`/v1/events`: the organization's event stream, ascending ids."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from core.http.deps import ServicesDep
from core.http.v1.auth import ScopeDep
from core.http.v1.shared import Page, problems
from core.owner.events import list_events
from core.platform.pagination import DEFAULT_LIMIT, MAX_LIMIT

router = APIRouter(tags=["events"], responses=problems(401, 503))


class Event(BaseModel):
    """One event of the organization's stream."""

    id: int
    type: str = Field(description="e.g. `submission.received`, `delivery.dead`")
    subject: str | None = Field(description="the id of what it is about")
    data: dict[str, Any]
    created_at: datetime


class EventPage(Page[Event]):
    """One page of the event stream."""

    next_cursor: str | None = Field(
        description="pass as `after` to get the next page; null on the last page"
    )


@router.get("/events", responses=problems(422))
async def events_list(
    scope: ScopeDep,
    services: ServicesDep,
    after: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
) -> EventPage:
    """Events with ids above `after`, oldest first; pass the last id as the next `after`."""
    async with services.db.scoped(scope) as conn:
        page = await list_events(conn, scope, after=after, limit=limit + 1)
    next_cursor = None
    if len(page) > limit:
        page = page[:limit]
        next_cursor = str(page[-1]["id"])
    return EventPage(data=[Event(**row) for row in page], next_cursor=next_cursor)
