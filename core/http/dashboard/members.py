"""The members page (owners only): the organization's members with their roles, changed or
removed; invitations sent, listed, sent again and withdrawn. The same `core` calls as
`/v1/members` and `/v1/invitations`."""

from __future__ import annotations

from fastapi import APIRouter, Request
from starlette.responses import Response

from core.http.access import AuditedRoute, ChangeDep
from core.http.dashboard.pages import CheckedForm, SessionDep, form_text, page_needs, see_other
from core.http.dashboard.shared import page
from core.http.deps import ServicesDep
from core.owner import members
from core.owner.roles import ROLES
from core.platform.clock import utcnow

router = APIRouter(prefix="/app", include_in_schema=False, route_class=AuditedRoute)
# The page lists this many members and pending invitations (an organization's people).
SHOWN = 500


@router.get("/members", dependencies=[page_needs("manage_members")])
async def members_page(request: Request, services: ServicesDep, session: SessionDep) -> Response:
    async with services.db.scoped(session.scope) as conn:
        people = await members.list_members(conn, session.scope, after=None, limit=SHOWN)
        pending = await members.list_invitations(
            conn, session.scope, after=None, limit=SHOWN, now=utcnow()
        )
    return await page(
        request,
        services,
        session,
        "members.html",
        title="Members",
        active="/app/members",
        people=people,
        owners=sum(1 for m in people if m["role"] == "owner"),
        pending=pending,
        roles=ROLES,
        # `postbag dev` catches email: the invitation is read in its mailbox.
        mailbox=services.settings.email_provider == "dev",
        limits={
            "address": members.ADDRESS_INVITATIONS_PER_DAY,
            "organization": members.ORGANIZATION_INVITATIONS_PER_DAY,
        },
    )


@router.post("/members", dependencies=[page_needs("manage_members", "member.invited")])
async def invite(change: ChangeDep, services: ServicesDep, form: CheckedForm) -> Response:
    await members.invite(
        change,
        services.settings,
        email=form_text(form, "email"),
        role=members.checked_role(form_text(form, "role")),
    )
    return see_other("/app/members")


@router.post(
    "/members/{member_id}/role", dependencies=[page_needs("manage_members", "member.role_changed")]
)
async def change_role(
    change: ChangeDep, session: SessionDep, form: CheckedForm, member_id: str
) -> Response:
    role = members.checked_role(form_text(form, "role"))
    await members.change_role(change, member_id=member_id, role=role)
    # An owner who gave themselves another role may no longer open this page.
    return see_other("/app" if member_id == session.member_id else "/app/members")


@router.post(
    "/members/{member_id}/remove", dependencies=[page_needs("manage_members", "member.removed")]
)
async def remove(
    change: ChangeDep, session: SessionDep, _form: CheckedForm, member_id: str
) -> Response:
    await members.remove_member(change, member_id=member_id)
    return see_other("/app/sign-in" if member_id == session.member_id else "/app/members")


@router.post(
    "/members/invitations/{invitation_id}/withdraw",
    dependencies=[page_needs("manage_members", "invitation.withdrawn")],
)
async def withdraw(change: ChangeDep, _form: CheckedForm, invitation_id: str) -> Response:
    await members.withdraw_invitation(change, invitation_id=invitation_id)
    return see_other("/app/members")


@router.post(
    "/members/invitations/{invitation_id}/resend",
    dependencies=[page_needs("manage_members", "invitation.resent")],
)
async def resend(
    change: ChangeDep, services: ServicesDep, _form: CheckedForm, invitation_id: str
) -> Response:
    await members.resend_invitation(change, services.settings, invitation_id=invitation_id)
    return see_other("/app/members")
