"""`/v1/forms/{id}/routes` and `/v1/routes/{id}`: which submissions go to which destination."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel

from core.http.access import AuditedRoute, ChangeDep
from core.http.deps import ServicesDep
from core.http.v1.auth import ScopeDep, needs
from core.http.v1.shared import Page, PageDep, problems
from core.owner import routes
from core.owner.routes import RouteFields, RoutePatch, Template
from core.platform.vocabulary import DigestPeriod, RouteMode, SubmissionStatus

router = APIRouter(tags=["routes"], responses=problems(401, 503), route_class=AuditedRoute)


class Route(BaseModel):
    """A route as read."""

    id: str
    form_id: str
    destination_id: str
    enabled: bool
    include_statuses: list[SubmissionStatus]
    mode: RouteMode
    period: DigestPeriod | None
    template: Template | None
    created_at: datetime
    updated_at: datetime


def _route(row: dict[str, Any]) -> Route:
    return Route.model_validate({name: row[name] for name in Route.model_fields})


@router.post(
    "/forms/{form_id}/routes",
    dependencies=[needs("configure", "route.created")],
    status_code=201,
    responses=problems(404, 409, 422),
)
async def create_route(change: ChangeDep, form_id: str, body: RouteFields) -> Route:
    """Route the form's submissions to a destination (one live route per pair)."""
    return _route(await routes.create_route(change, form_id=form_id, fields=body))


@router.get("/forms/{form_id}/routes", dependencies=[needs("read")], responses=problems(404, 422))
async def list_routes(
    form_id: str, scope: ScopeDep, services: ServicesDep, page: PageDep
) -> Page[Route]:
    """The form's routes, oldest first."""
    async with services.db.scoped(scope) as conn:
        rows = await routes.list_routes(
            conn, scope, form_id=form_id, after=page.after_id(), limit=page.limit + 1
        )
    data, cursor = page.page(rows, "id")
    return Page[Route](data=[_route(row) for row in data], next_cursor=cursor)


@router.patch(
    "/routes/{route_id}",
    dependencies=[needs("configure", "route.updated")],
    responses=problems(404, 422),
)
async def update_route(change: ChangeDep, route_id: str, body: RoutePatch) -> Route:
    """Change some settings; switching to `immediate` drops the digest period."""
    return _route(await routes.update_route(change, route_id=route_id, patch=body))


@router.delete(
    "/routes/{route_id}",
    dependencies=[needs("configure", "route.deleted")],
    status_code=204,
    response_class=Response,
    responses=problems(404, 422),
)
async def delete_route(change: ChangeDep, route_id: str) -> None:
    """Delete a route; deliveries already queued through it are kept."""
    await routes.delete_route(change, route_id=route_id)
