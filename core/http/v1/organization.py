"""`/v1/organization`: the organization's own settings (where its notices go)."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from core.http.access import AuditedRoute, ChangeDep
from core.http.deps import ServicesDep
from core.http.v1.auth import ScopeDep, needs
from core.http.v1.shared import problems
from core.owner import notifications
from core.owner.notifications import NotifySettings

router = APIRouter(
    tags=["organization"], responses=problems(401, 403, 503), route_class=AuditedRoute
)


class Organization(BaseModel):
    """The organization's settings."""

    id: str
    notify: list[str] = Field(
        description=(
            "the addresses told by email when a destination pauses itself, when deliveries "
            "start to fail for good, and when the monthly quota is reached (docs/operations.md)"
        )
    )
    notify_destination: str | None = Field(
        default=None,
        description="the chat or webhook destination told the same (never about itself)",
    )


@router.get("/organization", dependencies=[needs("read")])
async def get_organization(scope: ScopeDep, services: ServicesDep) -> Organization:
    """The organization's settings."""
    async with services.db.scoped(scope) as conn:
        found = await notifications.notice_settings(conn, scope)
    return Organization(id=scope.organization_id, **found)


@router.patch(
    "/organization",
    dependencies=[needs("configure", "organization.updated")],
    responses=problems(422),
)
async def update_organization(change: ChangeDep, body: NotifySettings) -> Organization:
    """Replace the notification addresses (at most 10; `[]` sends none), the notice
    destination (a chat or webhook destination; null for none), or both: a key left out
    keeps its setting."""
    found = await notifications.update_organization(change, settings=body)
    return Organization(id=change.scope.organization_id, **found)
