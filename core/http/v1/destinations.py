"""`/v1/destinations`: where submissions go; secrets are write-only and versioned."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from core.destinations.base import ValidationContext
from core.http.access import AuditedRoute, ChangeDep
from core.http.deps import NowDep, ServicesDep
from core.http.v1.auth import AccessDep, ScopeDep, needs
from core.http.v1.shared import Page, PageDep, problems, read_one
from core.outbox import replays
from core.outbox.replays import ReplayFilter
from core.outbox.wakeup import wake_deliveries
from core.owner import destinations
from core.owner.destinations import (
    DestinationFields,
    DestinationPatch,
    DestinationType,
    PauseAfter,
)
from core.owner.health import health_reading
from core.owner.roles import may
from core.platform.db import Conn
from core.platform.scope import OrgScope
from core.platform.services import Services
from core.platform.vocabulary import HealthReading, PausedReason

router = APIRouter(tags=["destinations"], responses=problems(401, 503), route_class=AuditedRoute)


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
    paused_reason: PausedReason | None = Field(
        description=(
            "why it is paused: `owner` (turned off) or `failing` (it paused itself: every "
            "attempt failed for its window); null while enabled"
        )
    )
    paused_at: datetime | None
    pause_after: PauseAfter
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


class ReplayOffer(BaseModel):
    """What resuming offers to send again: the dry run of a replay of the destination's
    dead and skipped deliveries since its failing window (or its pause) began. POST `filter`
    to `/v1/deliveries/replay` to queue them."""

    count: int
    filter: dict[str, Any]


class UpdatedDestination(Destination):
    """A destination as changed; `replay` is set when the change resumed it."""

    replay: ReplayOffer | None = None


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
        "paused_reason": row["paused_reason"],
        "paused_at": row["paused_at"],
        "pause_after": PauseAfter(
            hours=row["pause_after_hours"], attempts=row["pause_after_attempts"]
        ),
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


@router.post(
    "/destinations",
    dependencies=[needs("configure", "destination.created")],
    status_code=201,
    responses=problems(402, 422),
)
async def create_destination(
    change: ChangeDep, body: DestinationFields, services: ServicesDep
) -> CreatedDestination:
    """Create a destination; a webhook without `secret` gets a generated one, returned once."""
    created = await destinations.create_destination(change, fields=body, ctx=_context(services))
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
    row = await read_one(
        services, access.scope, destinations.get_destination, destination_id=destination_id
    )
    return Destination(**_fields(row, targets=may(access.actor.role, "read_values")))


async def replay_offer(
    conn: Conn, scope: OrgScope, row: Mapping[str, Any], *, now: datetime
) -> ReplayOffer | None:
    """The replay a resume offers: what went dead or was skipped since the failing window
    began (a pause for `failing`) or since the pause (the owner's)."""
    resumed = row.get("resumed")
    if resumed is None:
        return None
    since: datetime = resumed["paused_at"]
    if resumed["paused_reason"] == "failing":
        since -= timedelta(hours=resumed["pause_after_hours"])
    replay = ReplayFilter(status=["dead", "skipped"], since=since, destination=row["id"])
    counted = await replays.count_replay(conn, scope, replay, now=now)
    shown = counted["filter"]
    return ReplayOffer(
        count=counted["count"],
        filter={key: shown[key] for key in ("status", "since", "destination")},
    )


@router.patch(
    "/destinations/{destination_id}",
    dependencies=[needs("configure", "destination.updated")],
    responses=problems(404, 422),
)
async def update_destination(
    change: ChangeDep,
    destination_id: str,
    body: DestinationPatch,
    scope: ScopeDep,
    services: ServicesDep,
    now: NowDep,
) -> UpdatedDestination:
    """Change some fields; a new `secret` becomes the next secret version (rotation).
    `enabled: true` resumes a paused destination: what waited for it is sent, and `replay`
    counts what went dead or was skipped meanwhile (nothing is queued until you ask)."""
    row = await destinations.update_destination(
        change,
        destination_id=destination_id,
        patch=body,
        ctx=_context(services),
        wake=partial(wake_deliveries, services),
    )
    async with services.db.scoped(scope) as conn:
        offer = await replay_offer(conn, scope, row, now=now)
    return UpdatedDestination(**_fields(row), replay=offer)


@router.delete(
    "/destinations/{destination_id}",
    dependencies=[needs("configure", "destination.deleted")],
    status_code=204,
    response_class=Response,
    responses=problems(404, 422),
)
async def delete_destination(change: ChangeDep, destination_id: str) -> None:
    """Delete a destination and the routes to it; deliveries still queued to it end `skipped`."""
    await destinations.delete_destination(change, destination_id=destination_id)
