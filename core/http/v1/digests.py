"""`/v1/digests`: the summaries digest routes sent, one per route and closed period."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from core.http.access import AuditedRoute
from core.http.deps import ServicesDep
from core.http.v1.auth import ScopeDep, needs
from core.http.v1.shared import Page, PageDep, problems
from core.ticks import digests

router = APIRouter(tags=["digests"], responses=problems(401, 503), route_class=AuditedRoute)


class Digest(BaseModel):
    """One closed period of a digest route, and the delivery that summarised it."""

    id: str
    route: str
    period: str = Field(description="`YYYY-MM-DDTHH`, `YYYY-MM-DD` or ISO week `YYYY-Www` (UTC)")
    period_start: datetime
    period_end: datetime
    count: int = Field(description="matching submissions in the period")
    delivery: str | None
    delivery_status: str | None
    created_at: datetime


@router.get("/digests", dependencies=[needs("read")], responses=problems(422))
async def list_digests(
    scope: ScopeDep,
    services: ServicesDep,
    page: PageDep,
    route: Annotated[str | None, Query(max_length=64, description="only this route's")] = None,
) -> Page[Digest]:
    """The organization's digests, newest first; `route=` narrows to one route."""
    async with services.db.scoped(scope) as conn:
        rows = await digests.list_digests(
            conn, scope, route_id=route, before=page.after_id(), limit=page.limit + 1
        )
    data, cursor = page.page(rows, "id")
    return Page[Digest](data=[Digest(**row) for row in data], next_cursor=cursor)
