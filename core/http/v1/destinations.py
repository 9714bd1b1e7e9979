"""`/v1/destinations`: where submissions go; secrets are write-only and versioned."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request, Response
from pydantic import BaseModel, Field

from core.destinations.base import ValidationContext
from core.http.access import AuditedRoute, audit_as
from core.http.deps import ServicesDep
from core.http.v1.auth import AccessDep, ScopeDep, needs
from core.http.v1.shared import Page, PageDep, problems
from core.owner import destinations
from core.owner.destinations import DestinationFields, DestinationPatch, DestinationType
from core.owner.health import health_reading
from core.owner.roles import may
from core.platform.services import Services
from core.platform.vocabulary import HealthReading

router = APIRouter(tags=["destinations"], responses=problems(401, 503), route_class=AuditedRoute)


class Destination(BaseModel):
    """A destination as read: its config as given, and whether a secret is set (never which)."""

    id: str
    type: DestinationType
    name: str
    config: dict[str, Any]
    enabled: bool
    health: HealthReading = Field(
        description=(
            "`healthy`, `degraded` (some attempts fail, or sends are slow), `failing` (most "
            "attempts fail, or only probes are sent) or `paused` (turned off); see "
            "docs/delivery.md"
        )
    )
    throttled: bool = Field(
        description="true while a storm of failures limits it to one probe per window"
    )
    health_stats: dict[str, Any] | None = Field(
        default=None,
        description=(
            "the last 24 hours of attempts, rolled up by the retention tick: `attempts`, "
            "`success_rate` (0-1), `p95_duration_ms`, `computed_at`; null until first computed"
        ),
    )
    secret_set: bool
    secret_version: int | None = Field(description="the current secret version, if any")
    created_at: datetime
    updated_at: datetime


class CreatedDestination(Destination):
    """A new destination; `secret` is the generated webhook secret, shown here only once."""

    secret: str | None = Field(
        default=None,
        description="the webhook signing secret Postbag generated (null when you gave one)",
    )


def _fields(row: Mapping[str, Any], *, targets: bool = True) -> dict[str, Any]:
    """A destination as answered; without `targets` (a viewer), its config is `{}`."""
    return {
        "id": row["id"],
        "type": row["type"],
        "name": row["name"],
        "config": row["config"] if targets else {},
        "enabled": row["enabled"],
        "health": health_reading(row),
        "throttled": row["health"] == "failing",
        "health_stats": row.get("health_stats"),
        "secret_set": row["secret_version"] is not None,
        "secret_version": row["secret_version"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


def _context(services: Services) -> ValidationContext:
    return ValidationContext(allow_private_targets=services.settings.allow_private_targets)


@router.post(
    "/destinations",
    dependencies=[needs("configure", "destination.created")],
    status_code=201,
    responses=problems(402, 422),
)
async def create_destination(
    body: DestinationFields, scope: ScopeDep, services: ServicesDep
) -> CreatedDestination:
    """Create a destination; a webhook without `secret` gets a generated one, returned once."""
    async with services.db.scoped(scope) as conn:
        created = await destinations.create_destination(
            conn, scope, fields=body, ctx=_context(services)
        )
    return CreatedDestination(**_fields(created.destination), secret=created.generated_secret)


@router.get("/destinations", dependencies=[needs("read")], responses=problems(422))
async def list_destinations(
    access: AccessDep, services: ServicesDep, page: PageDep
) -> Page[Destination]:
    """The organization's destinations, oldest first (a viewer reads each `config` as
    `{}`: targets are for the operator role and above)."""
    async with services.db.scoped(access.scope) as conn:
        rows = await destinations.list_destinations(
            conn, access.scope, after=page.after_id(), limit=page.limit + 1
        )
    data, cursor = page.page(rows, "id")
    targets = may(access.actor.role, "read_values")
    return Page[Destination](
        data=[Destination(**_fields(row, targets=targets)) for row in data], next_cursor=cursor
    )


@router.get(
    "/destinations/{destination_id}", dependencies=[needs("read")], responses=problems(404, 422)
)
async def get_destination(
    destination_id: str, access: AccessDep, services: ServicesDep
) -> Destination:
    """One destination (a viewer reads its `config` as `{}`)."""
    async with services.db.scoped(access.scope) as conn:
        row = await destinations.get_destination(conn, access.scope, destination_id=destination_id)
    return Destination(**_fields(row, targets=may(access.actor.role, "read_values")))


@router.patch(
    "/destinations/{destination_id}",
    dependencies=[needs("configure", "destination.updated")],
    responses=problems(404, 422),
)
async def update_destination(
    destination_id: str,
    body: DestinationPatch,
    scope: ScopeDep,
    services: ServicesDep,
    request: Request,
) -> Destination:
    """Change some fields; a new `secret` becomes the next secret version (rotation)."""
    if body.rotates_secret():
        audit_as(request, action="destination.secret_rotated")
    async with services.db.scoped(scope) as conn:
        row = await destinations.update_destination(
            conn, scope, destination_id=destination_id, patch=body, ctx=_context(services)
        )
    return Destination(**_fields(row))


@router.delete(
    "/destinations/{destination_id}",
    dependencies=[needs("configure", "destination.deleted")],
    status_code=204,
    response_class=Response,
    responses=problems(404, 422),
)
async def delete_destination(destination_id: str, scope: ScopeDep, services: ServicesDep) -> None:
    """Delete a destination and the routes to it; deliveries still queued to it end `skipped`."""
    async with services.db.scoped(scope) as conn:
        await destinations.delete_destination(conn, scope, destination_id=destination_id)
