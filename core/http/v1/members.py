"""`/v1/members`: the organization's people, invited by email, with a role each."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Depends, Response
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ConfigDict, StringConstraints

from core.http.deps import ServicesDep
from core.http.v1.auth import ScopeDep
from core.http.v1.shared import Page, PageDep, problems
from core.owner import members
from core.owner.organizations import hash_key
from core.owner.roles import Actor, require
from core.platform.queries import queries
from core.platform.vocabulary import Role

router = APIRouter(tags=["members"], responses=problems(401, 403, 422, 503))
_bearer = HTTPBearer(auto_error=False)


async def key_actor(
    scope: ScopeDep,
    services: ServicesDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Actor:
    """The request's API key as an actor. Keys have no role of their own yet: each acts as
    the organization's owner, as every key always could."""
    assert credentials is not None  # ScopeDep refused a request without a live key
    async with services.db.scoped(scope) as conn:
        cur = await conn.execute(
            queries["key_actor"], {"key_hash": hash_key(credentials.credentials)}
        )
        row = await cur.fetchone()
    assert row is not None
    return Actor("key", row["id"], row["name"], "owner")


KeyActorDep = Annotated[Actor, Depends(key_actor)]


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


@router.post("/members", status_code=201, responses=problems(409, 422))
async def invite_member(
    body: InvitationFields, scope: ScopeDep, actor: KeyActorDep, services: ServicesDep
) -> SentInvitation:
    """Email an invitation to join the organization with `role`: a one-time link valid 7
    days, through the installation's email provider. Not sent, nothing is stored
    (`503 email_not_sent`); an address already a member's is `409 already_member`."""
    require(actor, "manage_members")
    email = members.checked_email(body.email)
    invitation = await members.invite(services, scope, email=email, role=body.role, actor=actor)
    return SentInvitation(id=invitation, email=email, role=body.role)


@router.get("/members", responses=problems(422))
async def list_members(
    scope: ScopeDep, actor: KeyActorDep, services: ServicesDep, page: PageDep
) -> Page[Member]:
    """The organization's members with their roles."""
    require(actor, "manage_members")
    async with services.db.scoped(scope) as conn:
        rows = await members.list_members(conn, scope, after=page.after_id(), limit=page.limit + 1)
    data, cursor = page.page(rows, "id")
    return Page[Member](data=[Member(**row) for row in data], next_cursor=cursor)


@router.patch(
    "/members/{member_id}",
    status_code=204,
    response_class=Response,
    responses=problems(404, 409, 422),
)
async def change_role(
    member_id: str, body: RoleFields, scope: ScopeDep, actor: KeyActorDep, services: ServicesDep
) -> None:
    """Give a member another role, from their next request on; the last owner cannot be
    demoted (`409 last_owner`)."""
    require(actor, "manage_members")
    async with services.db.scoped(scope) as conn:
        await members.change_role(conn, scope, member_id=member_id, role=body.role)


@router.delete(
    "/members/{member_id}", status_code=204, response_class=Response, responses=problems(404, 409)
)
async def remove_member(
    member_id: str, scope: ScopeDep, actor: KeyActorDep, services: ServicesDep
) -> None:
    """Remove a member from the organization: their sessions in it end at once. The last
    owner cannot leave (`409 last_owner`)."""
    require(actor, "manage_members")
    async with services.db.scoped(scope) as conn:
        await members.remove_member(conn, scope, member_id=member_id)
