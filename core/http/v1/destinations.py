"""`/v1/destinations`: where submissions go; secrets are write-only and versioned."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from core.destinations.base import ValidationContext
from core.http.deps import ServicesDep
from core.http.v1.auth import ScopeDep
from core.http.v1.shared import Page, PageDep, problems
from core.owner import destinations
from core.owner.destinations import DestinationFields, DestinationPatch, DestinationType
from core.owner.health import health_reading
from core.platform.services import Services
from core.platform.vocabulary import HealthReading

router = APIRouter(tags=["destinations"], responses=problems(401, 503))


class RateLimitRead(BaseModel):
    """A destination's rate limit as read."""

    per_second: float = Field(description="the most sends a second, all workers together")
    default: bool = Field(description="true when it is the type's default (none was set)")
    current_per_second: float = Field(
        description=(
            "the rate in force now: lower than `per_second` for a while after the service "
            "answered 429 (halved, doubling back every 60 s); see docs/delivery.md"
        )
    )


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
    rate_limit: RateLimitRead | None = Field(
        description="its rate limit, set or its type's default; null: none"
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


def _fields(row: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "type": row["type"],
        "name": row["name"],
        "config": row["config"],
        "enabled": row["enabled"],
        "health": health_reading(row),
        "throttled": row["health"] == "failing",
        "health_stats": row.get("health_stats"),
        "rate_limit": None
        if row["rate_per_second"] is None
        else {
            "per_second": row["rate_per_second"],
            "default": row["rate_default"],
            "current_per_second": row["rate_now"],
        },
        "secret_set": row["secret_version"] is not None,
        "secret_version": row["secret_version"],
        "created_at": row["created_at"],
        "updated_at": row["updated_at"],
    }


def _context(services: Services) -> ValidationContext:
    return ValidationContext(allow_private_targets=services.settings.allow_private_targets)


@router.post("/destinations", status_code=201, responses=problems(402, 422))
async def create_destination(
    body: DestinationFields, scope: ScopeDep, services: ServicesDep
) -> CreatedDestination:
    """Create a destination; a webhook without `secret` gets a generated one, returned once."""
    async with services.db.scoped(scope) as conn:
        created = await destinations.create_destination(
            conn, scope, fields=body, ctx=_context(services)
        )
    return CreatedDestination(**_fields(created.destination), secret=created.generated_secret)


@router.get("/destinations", responses=problems(422))
async def list_destinations(
    scope: ScopeDep, services: ServicesDep, page: PageDep
) -> Page[Destination]:
    """The organization's destinations, oldest first."""
    async with services.db.scoped(scope) as conn:
        rows = await destinations.list_destinations(
            conn, scope, after=page.after_id(), limit=page.limit + 1
        )
    data, cursor = page.page(rows, "id")
    return Page[Destination](data=[Destination(**_fields(row)) for row in data], next_cursor=cursor)


@router.get("/destinations/{destination_id}", responses=problems(404, 422))
async def get_destination(
    destination_id: str, scope: ScopeDep, services: ServicesDep
) -> Destination:
    """One destination."""
    async with services.db.scoped(scope) as conn:
        row = await destinations.get_destination(conn, scope, destination_id=destination_id)
    return Destination(**_fields(row))


@router.patch("/destinations/{destination_id}", responses=problems(404, 422))
async def update_destination(
    destination_id: str, body: DestinationPatch, scope: ScopeDep, services: ServicesDep
) -> Destination:
    """Change some fields; a new `secret` becomes the next secret version (rotation)."""
    async with services.db.scoped(scope) as conn:
        row = await destinations.update_destination(
            conn, scope, destination_id=destination_id, patch=body, ctx=_context(services)
        )
    return Destination(**_fields(row))


@router.delete(
    "/destinations/{destination_id}",
    status_code=204,
    response_class=Response,
    responses=problems(404, 422),
)
async def delete_destination(destination_id: str, scope: ScopeDep, services: ServicesDep) -> None:
    """Delete a destination and the routes to it; deliveries still queued to it end `skipped`."""
    async with services.db.scoped(scope) as conn:
        await destinations.delete_destination(conn, scope, destination_id=destination_id)
