"""`/v1/members` and `/v1/invitations`: the organization's people, invited by email, with a
role each, and the invitations still pending."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, StringConstraints

from core.http.access import AuditedRoute, ChangeDep
from core.http.deps import ServicesDep
from core.http.v1.auth import ScopeDep, needs
from core.http.v1.shared import Page, PageDep, problems
from core.owner import members
from core.platform.clock import utcnow
from core.platform.vocabulary import ActorKind, Role

router = APIRouter(
    tags=["members"], responses=problems(401, 403, 422, 503), route_class=AuditedRoute
)


class InvitationFields(BaseModel):
    """Whom to invite, with which role."""

    model_config = ConfigDict(extra="forbid")

    email: Annotated[str, StringConstraints(min_length=3, max_length=320)]
    role: Role


class RoleFields(BaseModel):
    """A member's new role."""

    model_config = ConfigDict(extra="forbid")

    role: Role


class Member(BaseModel):
    """A member of the organization: never a password, hash or second factor."""

    id: str
    email: str
    role: Role
    joined_at: datetime


class SentInvitation(BaseModel):
    """An invitation emailed: its link is only in the email."""

    id: str
    email: str
    role: Role


class Sender(BaseModel):
    """Who sent an invitation: a member or an API key, by id and name."""

    kind: ActorKind
    id: str
    name: str


class PendingInvitation(BaseModel):
    """An invitation neither accepted, withdrawn nor expired: never its link."""

    id: str
    email: str
    role: Role
    invited_by: Sender
    created_at: datetime
    expires_at: datetime


@router.post(
    "/members",
    status_code=201,
    responses=problems(409, 422, 429),
    dependencies=[needs("manage_members", "member.invited")],
)
async def invite_member(
    change: ChangeDep, body: InvitationFields, services: ServicesDep
) -> SentInvitation:
    """Email an invitation to join the organization with `role`: a one-time link valid 7
    days, through the installation's email provider, in place of the address's pending one.
    Not sent, nothing is stored (`503 email_not_sent`); an address already a member's is
    `409 already_member`; past 3 invitations of an address or 50 of the organization in 24
    hours, `429 too_many_invitations` (nothing stored or sent)."""
    email = members.checked_email(body.email)
    invitation = await members.invite(change, services.settings, email=email, role=body.role)
    return SentInvitation(id=invitation, email=email, role=body.role)


@router.get("/members", responses=problems(422), dependencies=[needs("manage_members")])
async def list_members(scope: ScopeDep, services: ServicesDep, page: PageDep) -> Page[Member]:
    """The organization's members with their roles."""
    async with services.db.scoped(scope) as conn:
        rows = await members.list_members(conn, scope, after=page.after_id(), limit=page.limit + 1)
    data, cursor = page.page(rows, "id")
    return Page[Member](data=[Member(**row) for row in data], next_cursor=cursor)


@router.patch(
    "/members/{member_id}",
    status_code=204,
    response_class=Response,
    responses=problems(404, 409, 422),
    dependencies=[needs("manage_members", "member.role_changed")],
)
async def change_role(change: ChangeDep, member_id: str, body: RoleFields) -> None:
    """Give a member another role, from their next request on; the last owner cannot be
    demoted (`409 last_owner`)."""
    await members.change_role(change, member_id=member_id, role=body.role)


@router.delete(
    "/members/{member_id}",
    status_code=204,
    response_class=Response,
    responses=problems(404, 409),
    dependencies=[needs("manage_members", "member.removed")],
)
async def remove_member(change: ChangeDep, member_id: str) -> None:
    """Remove a member from the organization: their sessions in it end at once. The last
    owner cannot leave (`409 last_owner`)."""
    await members.remove_member(change, member_id=member_id)


def _pending(row: dict[str, Any]) -> PendingInvitation:
    sender = Sender(kind=row["sender_kind"], id=row["sender_id"], name=row["invited_by"])
    fields = {k: v for k, v in row.items() if k not in ("sender_kind", "sender_id", "invited_by")}
    return PendingInvitation(**fields, invited_by=sender)


@router.get("/invitations", responses=problems(422), dependencies=[needs("manage_members")])
async def list_invitations(
    scope: ScopeDep, services: ServicesDep, page: PageDep
) -> Page[PendingInvitation]:
    """The organization's pending invitations (neither accepted, withdrawn nor expired)."""
    async with services.db.scoped(scope) as conn:
        rows = await members.list_invitations(
            conn, scope, after=page.after_id(), limit=page.limit + 1, now=utcnow()
        )
    data, cursor = page.page(rows, "id")
    return Page[PendingInvitation](
        data=[_pending(row) for row in data],
        next_cursor=cursor,
    )


@router.delete(
    "/invitations/{invitation_id}",
    status_code=204,
    response_class=Response,
    responses=problems(404),
    dependencies=[needs("manage_members", "invitation.withdrawn")],
)
async def withdraw_invitation(change: ChangeDep, invitation_id: str) -> None:
    """Withdraw a pending invitation: its link stops working at once."""
    await members.withdraw_invitation(change, invitation_id=invitation_id)


@router.post(
    "/invitations/{invitation_id}/resend",
    status_code=201,
    responses=problems(404, 429),
    dependencies=[needs("manage_members", "invitation.resent")],
)
async def resend_invitation(
    change: ChangeDep, invitation_id: str, services: ServicesDep
) -> SentInvitation:
    """Email a pending invitation again: a new invitation (a new id and link, valid 7 days)
    to the same address with the same role; the old link stops working. The same daily
    bounds and `503 email_not_sent` as an invitation."""
    sent = await members.resend_invitation(change, services.settings, invitation_id=invitation_id)
    return SentInvitation(**sent)
