"""`/v1/organization`: the organization's own settings (where its notices go), its single
sign-on and its sign-in policy (docs/sso.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, Field

from core.http.access import AuditedRoute, ChangeDep
from core.http.deps import NowDep, ServicesDep
from core.http.v1.auth import ScopeDep, needs
from core.http.v1.shared import problems
from core.owner import notifications, sso
from core.owner.notifications import NotifySettings
from core.owner.sso import SsoPolicy, SsoSettings, redirect_uri
from core.platform.services import Services
from core.platform.vocabulary import Role

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


class Sso(BaseModel):
    """The organization's single sign-on as answered: never the client secret."""

    configured: bool = Field(description="false: none set up (the other fields are empty)")
    issuer: str | None = None
    client_id: str | None = None
    has_client_secret: bool = False
    allowed_domains: list[str] = Field(default_factory=list)
    default_role: Role | None = None
    scopes: str | None = None
    updated_at: datetime | None = None
    redirect_uri: str = Field(description="register this address with the provider")


def _sso(row: dict[str, Any] | None, services: Services) -> Sso:
    return Sso(**(row or {}), configured=row is not None, redirect_uri=redirect_uri(services))


@router.get("/organization/sso", dependencies=[needs("manage_members")])
async def get_sso(scope: ScopeDep, services: ServicesDep) -> Sso:
    """The organization's single sign-on (the owner role); `configured: false` when none is
    set up."""
    async with services.db.scoped(scope) as conn:
        return _sso(await sso.get_sso(conn, scope), services)


@router.put(
    "/organization/sso",
    dependencies=[needs("manage_members", "sso.updated")],
    responses=problems(409, 422),
)
async def put_sso(change: ChangeDep, services: ServicesDep, now: NowDep, body: SsoSettings) -> Sso:
    """Set the OpenID Connect provider, the email domains it signs in (each one
    organization's: else `409 domain_taken`) and the role of a person signing in for the
    first time (default `viewer`). The client secret is write-only: omitted, the stored one
    stays (docs/sso.md)."""
    row = await sso.configure_sso(
        change, body, allow_private=services.settings.allow_private_targets, now=now
    )
    return _sso(row, services)


@router.delete(
    "/organization/sso",
    dependencies=[needs("manage_members", "sso.removed")],
    status_code=204,
)
async def delete_sso(change: ChangeDep) -> Response:
    """Turn single sign-on off, and `sso_required` with it (none set up: `204` too)."""
    await sso.remove_sso(change)
    return Response(status_code=204)


class Policy(BaseModel):
    """The organization's sign-in policy."""

    sso_required: bool
    two_factor_required: bool
    session_idle_minutes: int | None
    session_absolute_hours: int | None
    break_glass: list[str]


@router.get("/organization/policy", dependencies=[needs("read")])
async def get_policy(scope: ScopeDep, services: ServicesDep) -> Policy:
    """The organization's sign-in policy."""
    async with services.db.scoped(scope) as conn:
        return Policy(**await sso.get_policy(conn, scope))


@router.put(
    "/organization/policy",
    dependencies=[needs("manage_members", "organization.policy_updated")],
    responses=problems(422),
)
async def put_policy(change: ChangeDep, body: SsoPolicy) -> Policy:
    """Set the sign-in policy (the owner role): SSO required (password and link sign-in
    refused, but for the break-glass owners), two-factor required, session limits."""
    return Policy(**await sso.set_policy(change, body))
