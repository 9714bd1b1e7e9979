"""`/v1/organization`: the organization's own settings (where its notices go, its own email
sender)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, EmailStr, Field

from core.destinations.http import shared_client
from core.http.access import AuditedRoute, ChangeDep
from core.http.deps import NowDep, ServicesDep
from core.http.v1.auth import ScopeDep, needs
from core.http.v1.shared import problems
from core.owner import email_senders, notifications
from core.owner.email_senders import EmailSenderFields, SesAccount, SmtpServer
from core.owner.notifications import NotifySettings
from core.platform.ids import new_id
from core.platform.vocabulary import EmailSenderProvider

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


@router.get("/organization", dependencies=[needs("read")])
async def get_organization(scope: ScopeDep, services: ServicesDep) -> Organization:
    """The organization's settings."""
    async with services.db.scoped(scope) as conn:
        notify = await notifications.get_notify(conn, scope)
    return Organization(id=scope.organization_id, notify=notify)


@router.patch(
    "/organization",
    dependencies=[needs("configure", "organization.updated")],
    responses=problems(422),
)
async def update_organization(change: ChangeDep, body: NotifySettings) -> Organization:
    """Replace the notification addresses (at most 10; `[]` sends none)."""
    notify = await notifications.update_organization(change, settings=body)
    return Organization(id=change.scope.organization_id, notify=notify)


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
