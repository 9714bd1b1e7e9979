"""`/v1/events`: the organization's event stream, ascending ids."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from core.http.deps import ServicesDep
from core.http.v1.auth import ScopeDep
from core.http.v1.shared import problems
from core.owner.events import list_events
from core.platform.pagination import DEFAULT_LIMIT, MAX_LIMIT

router = APIRouter(tags=["events"], responses=problems(401, 503))


@router.get("/events", responses=problems(422))
async def events_list(
    scope: ScopeDep,
    services: ServicesDep,
    after: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = DEFAULT_LIMIT,
) -> dict[str, Any]:
    """Events with ids above `after`, oldest first; pass the last id as the next `after`."""
    async with services.db.scoped(scope) as conn:
        page = await list_events(conn, scope, after=after, limit=limit + 1)
    next_cursor = None
    if len(page) > limit:
        page = page[:limit]
        next_cursor = str(page[-1]["id"])
    return {"data": page, "next_cursor": next_cursor}
