"""`/v1/organization`: the organization's own settings (where its notices go, its own email
sender), its single sign-on and its sign-in policy (docs/sso.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, EmailStr, Field

from core.destinations.http import shared_client
from core.http.access import AuditedRoute, ChangeDep
from core.http.deps import NowDep, ServicesDep
from core.http.v1.auth import ScopeDep, needs
from core.http.v1.shared import problems
from core.owner import email_senders, notifications, sso
from core.owner.email_senders import EmailSenderFields, SesAccount, SmtpServer
from core.owner.notifications import NotifySettings
from core.owner.sso import SsoPolicy, SsoSettings, redirect_uri
from core.platform.ids import new_id
from core.platform.services import Services
from core.platform.vocabulary import EmailSenderProvider, Role

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


class EmailSender(BaseModel):
    """Which sender the organization's emails use (docs/autoresponse.md): its own, or the
    installation's provider; never the secret."""

    sender: Literal["organization", "installation"]
    provider: EmailSenderProvider | None
    from_address: str | None
    smtp: SmtpServer | None
    ses: SesAccount | None
    secret_set: bool
    updated_at: datetime | None


@router.get("/organization/email", dependencies=[needs("read")])
async def get_email_sender(scope: ScopeDep, services: ServicesDep) -> EmailSender:
    """The organization's email sender."""
    async with services.db.scoped(scope) as conn:
        row = await email_senders.get_sender(conn, scope)
    return EmailSender(**email_senders.shown(row))


@router.put(
    "/organization/email",
    dependencies=[needs("configure", "email_sender.updated")],
    responses=problems(422),
)
async def put_email_sender(
    change: ChangeDep, body: EmailSenderFields, services: ServicesDep, now: NowDep
) -> EmailSender:
    """Set the organization's own sender: its destinations', notices', acknowledgements' and
    autoresponses' emails go through it from the next send on."""
    shown = await email_senders.set_email_sender(
        change, body, now=now, allow_private=services.settings.allow_private_targets
    )
    return EmailSender(**shown)


@router.delete(
    "/organization/email",
    dependencies=[needs("configure", "email_sender.removed")],
    status_code=204,
)
async def delete_email_sender(change: ChangeDep) -> Response:
    """Back to the installation's provider (again: nothing changes)."""
    await email_senders.remove_email_sender(change)
    return Response(status_code=204)


class DnsRecords(BaseModel):
    """The DNS records the provider says the sending domain needs, as it says them."""

    provider: EmailSenderProvider | None
    domain: str | None
    records: list[dict[str, str]]
    detail: str | None


@router.get("/organization/email/dns", dependencies=[needs("read")])
async def get_email_dns(scope: ScopeDep, services: ServicesDep) -> DnsRecords:
    """The records to add for the organization's own sender, asked of its provider now
    (Resend's domain records; an SMTP provider's are in its documentation)."""
    async with services.db.scoped(scope) as conn:
        row = await email_senders.get_sender(conn, scope)
    return DnsRecords(**await email_senders.dns_records(services.settings, row))


class TestEmail(BaseModel):
    """Where the test email goes."""

    model_config = ConfigDict(extra="forbid")

    to: EmailStr


class TestResult(BaseModel):
    """What the send answered (nothing is stored)."""

    ok: bool
    sender: Literal["organization", "installation"]
    detail: str


@router.post(
    "/organization/email/test",
    dependencies=[needs("configure", "email_sender.tested")],
    responses=problems(422),
)
async def test_email_sender(scope: ScopeDep, services: ServicesDep, body: TestEmail) -> TestResult:
    """Send one test email through the sender in use; the result is not stored."""
    async with services.db.scoped(scope) as conn:
        row = await email_senders.get_sender(conn, scope)
    result = await email_senders.send_test(
        services.settings, row, shared_client(), to=str(body.to), message_key=new_id("dlv")
    )
    return TestResult(
        ok=result.ok,
        sender="installation" if row is None else "organization",
        detail=result.summary,
    )
