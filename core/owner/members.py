"""People in organizations (docs/teams.md): invitations, members and their roles, signing
in with a password (and a TOTP code), password resets, the first owner.

A member is one person across organizations; a membership gives them a role in one. The
last owner of an organization can neither leave nor be demoted (`409 last_owner`): the
owners are locked in one order before any change that could remove one, so two owners
demoting each other at once leave one. No token, hash or secret is ever logged or returned
except the one a link is made of, which goes only into the email or the terminal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from psycopg.types.json import Jsonb

from core.destinations.email import Email, not_sent_words, sealed_token, send_email
from core.destinations.http import shared_client
from core.destinations.text import ACCOUNT_EVENT, LINK_MARK, quoted
from core.owner.changes import Acting, Change, Origin
from core.owner.credentials import (
    hash_password,
    new_recovery_codes,
    new_token,
    new_totp_secret,
    password_matches,
    password_problem,
    recovery_hash,
    reset_address_hash,
    token_hash,
    totp_step,
)
from core.owner.roles import ROLES, Actor, outranks
from core.platform.addresses import valid_address
from core.platform.clock import utcnow
from core.platform.db import Conn
from core.platform.errors import (
    AlreadyMember,
    EmailNotSent,
    InvalidInput,
    LastOwner,
    NotFound,
    TooManyInvitations,
    Unauthenticated,
)
from core.platform.ids import new_id
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.platform.services import Services
from core.platform.settings import PasswordHashCost, Settings
from core.platform.vocabulary import MemberLinkKind, Role

INVITATION_LIFETIME = timedelta(days=7)
# The daily bounds on invitations (docs/teams.md): per address in an organization, and per
# organization, counted over the last INVITATION_DAY; past them nothing is stored or sent.
INVITATION_DAY = timedelta(days=1)
ADDRESS_INVITATIONS_PER_DAY = 3
ORGANIZATION_INVITATIONS_PER_DAY = 50
RESET_LIFETIME = timedelta(hours=1)
# Reset emails one address is sent at most per window, whoever asks from wherever.
RESET_BOUND = 3
RESET_WINDOW = timedelta(hours=1)
# A sign-in link of `postbag dev`, and the first owner's link to set a password.
SIGN_IN_LINK_LIFETIME = timedelta(hours=12)
FIRST_OWNER_LINK_LIFETIME = timedelta(days=7)
LOCAL_OWNER_EMAIL = "owner@postbag.localhost"
# The most organizations one failed sign-in is recorded in (each of the member's).
SIGN_IN_FAILURES_RECORDED = 20
EMAIL_TIMEOUT = 10.0
_WRONG = "wrong email or password"


def checked_email(value: str) -> str:
    """A member's address as one valid address, or InvalidInput."""
    address = valid_address(value)
    if address is None:
        raise InvalidInput(
            "email must be one valid address", [{"field": "email", "message": "not an address"}]
        )
    return address


def checked_role(value: str) -> Role:
    if value not in ROLES:
        raise InvalidInput(
            f"role must be one of {', '.join(ROLES)}", [{"field": "role", "message": "unknown"}]
        )
    return value


def checked_password(password: str) -> str:
    problem = password_problem(password)
    if problem:
        raise InvalidInput(problem, [{"field": "password", "message": problem}])
    return password


async def _one(conn: Conn, name: str, params: dict[str, Any]) -> dict[str, Any] | None:
    cur = await conn.execute(queries[name], params)
    return await cur.fetchone()


# --- members of an organization ---------------------------------------------------------


@scoped
async def list_members(
    conn: Conn, scope: OrgScope, *, after: str | None, limit: int
) -> list[dict[str, Any]]:
    """Up to `limit` members (id, email, role, joined_at) with ids after `after`."""
    cur = await conn.execute(
        queries["list_members"],
        {"organization_id": scope.organization_id, "after": after, "limit": limit},
    )
    return await cur.fetchall()


async def _locked_role(conn: Conn, scope: OrgScope, member_id: str) -> tuple[Role, list[str]]:
    """The member's role, and the organization's owners, all locked for a change."""
    org = scope.organization_id
    cur = await conn.execute(queries["lock_owners"], {"organization_id": org})
    owners = [row["member_id"] for row in await cur.fetchall()]
    row = await _one(conn, "membership_role", {"organization_id": org, "member_id": member_id})
    if row is None:
        raise NotFound(f"no member {member_id}")
    return row["role"], owners


@scoped
async def set_role(conn: Conn, scope: OrgScope, *, member_id: str, role: Role) -> None:
    """Give a member another role; the last owner keeps theirs (LastOwner)."""
    current, owners = await _locked_role(conn, scope, member_id)
    if current == "owner" and role != "owner" and owners == [member_id]:
        raise LastOwner("the last owner cannot be demoted; make another member owner first")
    await conn.execute(
        queries["set_membership_role"],
        {"organization_id": scope.organization_id, "member_id": member_id, "role": role},
    )


@scoped
async def delete_membership(conn: Conn, scope: OrgScope, *, member_id: str) -> None:
    """Remove a member from the organization; their sessions in it end at once. The last
    owner cannot leave (LastOwner)."""
    current, owners = await _locked_role(conn, scope, member_id)
    if current == "owner" and owners == [member_id]:
        raise LastOwner("the last owner cannot leave; make another member owner first")
    await conn.execute(
        queries["delete_membership"],
        {"organization_id": scope.organization_id, "member_id": member_id},
    )


async def change_role(change: Change, *, member_id: str, role: Role) -> None:
    """Give a member another role (the last owner keeps theirs)."""
    async with change as conn:
        await set_role(conn, change.scope, member_id=member_id, role=role)


async def remove_member(change: Change, *, member_id: str) -> None:
    """Remove a member from the organization (the last owner cannot leave)."""
    async with change as conn:
        await delete_membership(conn, change.scope, member_id=member_id)


# --- invitations --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Invitation:
    """An invitation as made: its id, and the token of its link (never stored)."""

    id: str
    token: str
    email: str
    role: Role
    created_at: datetime


def _retry_after(oldest: datetime, now: datetime) -> int:
    """Seconds until an invitation sent at `oldest` leaves the day the bounds count."""
    return max(math.ceil((oldest + INVITATION_DAY - now).total_seconds()), 1)


@scoped
async def create_invitation(
    conn: Conn, scope: OrgScope, *, email: str, role: Role, sender: Actor, now: datetime
) -> Invitation:
    """A one-time invitation to the organization, valid 7 days, sent by `sender`;
    AlreadyMember when the address already belongs to one of its members, TooManyInvitations
    past the daily bounds (the organization's invitations are counted under its lock, so two
    made at once cannot both pass the last place)."""
    org = scope.organization_id
    await conn.execute(queries["lock_invitations"], {"organization_id": org})
    if await _one(conn, "member_of_organization", {"organization_id": org, "email": email}):
        raise AlreadyMember(f"{email} is already a member")
    recent = await _one(
        conn,
        "count_recent_invitations",
        {"organization_id": org, "email": email, "since": now - INVITATION_DAY},
    )
    assert recent is not None
    if recent["address"] >= ADDRESS_INVITATIONS_PER_DAY:
        raise TooManyInvitations(
            f"{email} was invited {ADDRESS_INVITATIONS_PER_DAY} times in the last 24 hours; "
            "try again later",
            _retry_after(recent["address_oldest"], now),
        )
    if recent["organization"] >= ORGANIZATION_INVITATIONS_PER_DAY:
        raise TooManyInvitations(
            f"the organization sent {ORGANIZATION_INVITATIONS_PER_DAY} invitations in the last "
            "24 hours; try again later",
            _retry_after(recent["organization_oldest"], now),
        )
    invitation = Invitation(new_id("inv"), new_token(), email, role, now)
    await conn.execute(
        queries["insert_invitation"],
        {
            "id": invitation.id,
            "organization_id": org,
            "email": email,
            "role": role,
            "token_hash": token_hash(invitation.token),
            "invited_by": sender.name,
            "sender_kind": sender.kind,
            "sender_id": sender.id,
            "now": now,
            "expires_at": now + INVITATION_LIFETIME,
        },
    )
    return invitation


@scoped
async def list_invitations(
    conn: Conn, scope: OrgScope, *, after: str | None, limit: int, now: datetime
) -> list[dict[str, Any]]:
    """Up to `limit` pending invitations (neither accepted, withdrawn nor expired) with ids
    after `after`: never a token or its hash."""
    cur = await conn.execute(
        queries["list_invitations"],
        {"organization_id": scope.organization_id, "after": after, "limit": limit, "now": now},
    )
    return await cur.fetchall()


@scoped
async def end_invitation(conn: Conn, scope: OrgScope, *, invitation_id: str, now: datetime) -> None:
    """Withdraw a pending invitation: its link stops working. NotFound when there is no
    pending invitation of that id in the organization."""
    found = await _one(
        conn,
        "withdraw_invitation",
        {"id": invitation_id, "organization_id": scope.organization_id, "now": now},
    )
    if found is None:
        raise NotFound(f"no pending invitation {invitation_id}")


async def withdraw_invitation(change: Change, *, invitation_id: str) -> None:
    """Withdraw a pending invitation: its link stops working at once."""
    async with change as conn:
        await end_invitation(conn, change.scope, invitation_id=invitation_id, now=utcnow())


def invitation_email(
    invitation: Invitation, *, organization: str, inviter: str, public_url: str
) -> Email:
    """The invitation's email: the organization's and the inviter's names (tenant-written)
    only quoted on one line, capped, never a link (`quoted`)."""
    link = f"{public_url.rstrip('/')}/app/invitations/{invitation.token}"
    return Email(
        [invitation.email],
        f"You are invited to {quoted(organization)} on Postbag",
        f"{quoted(inviter)} invited you to {quoted(organization)} on Postbag, as "
        f"{invitation.role}.\n\n"
        f"Accept within 7 days (the link works once):\n{link}\n\n"
        "If you did not expect this, ignore this email.\n",
        loggable=False,
    )


async def invite(change: Change, settings: Settings, *, email: str, role: Role) -> str:
    """Invite `email` to the organization with `role` by email, as the change's actor; the
    invitation's id.

    The email goes through the installation's provider at once, inside the change's
    transaction: when it is not sent (the `log` provider included: the link would be lost)
    EmailNotSent is raised, naming the variables to set, and the invitation rolls back with
    its audit row, so nothing stays half-way. Once it is sent, the address's earlier
    pending invitations are withdrawn: one live link per address.
    """
    email, role = checked_email(email), checked_role(role)
    async with change as conn:
        return await _send_invitation(conn, change, settings, email=email, role=role)


async def resend_invitation(
    change: Change, settings: Settings, *, invitation_id: str
) -> dict[str, Any]:
    """Send a pending invitation again: a new one to the same address with the same role,
    made and sent as `invite` makes it (the same daily bounds), which withdraws the old
    link. NotFound when no pending invitation of that id is in the organization. The new
    invitation's id, address and role."""
    async with change as conn:
        pending = await _one(
            conn,
            "pending_invitation",
            {"id": invitation_id, "organization_id": change.scope.organization_id, "now": utcnow()},
        )
        if pending is None:
            raise NotFound(f"no pending invitation {invitation_id}")
        address, role = pending["address"], pending["role"]
        new = await _send_invitation(conn, change, settings, email=address, role=role)
    return {"id": new, "email": address, "role": role}


async def _send_invitation(
    conn: Conn, change: Change, settings: Settings, *, email: str, role: Role
) -> str:
    scope, actor = change.scope, change.acting.actor
    invitation = await create_invitation(
        conn, scope, email=email, role=role, sender=actor, now=utcnow()
    )
    change.subject = invitation.id
    org = await _one(conn, "get_organization", {"id": scope.organization_id})
    assert org is not None
    mail = invitation_email(
        invitation,
        organization=org["name"],
        inviter=actor.name,
        public_url=settings.public_url,
    )
    result = await send_email(
        settings, shared_client(), mail, message_key=invitation.id, timeout=EMAIL_TIMEOUT
    )
    if not result.ok:
        raise EmailNotSent(
            "the invitation email was not sent, nothing was stored: "
            f"{not_sent_words(settings, result)}"
        )
    await conn.execute(
        queries["replace_invitations"],
        {
            "organization_id": scope.organization_id,
            "email": email,
            "id": invitation.id,
            "created_at": invitation.created_at,
            "now": utcnow(),
        },
    )
    return invitation.id


async def open_invitation(conn: Conn, token: str, *, now: datetime) -> dict[str, Any]:
    """A live invitation (organization, email, role) and whether its address is a member
    with a password already; a used, withdrawn, expired or unknown one is NotFound, and so
    is one whose sender is gone (a key revoked, a member removed) or now holds a role below
    the invited one. In a transaction, the sender's role stays locked until it ends."""
    row = await _one(conn, "open_invitation", {"token_hash": token_hash(token), "now": now})
    if row is None:
        raise NotFound("this invitation was used, withdrawn, has expired, or does not exist")
    sender = await _one(
        conn,
        "invitation_sender_role",
        {
            "organization_id": row["organization_id"],
            "sender_kind": row["sender_kind"],
            "sender_id": row["sender_id"],
        },
    )
    if sender is None or sender["role"] is None or not outranks(sender["role"], row["role"]):
        raise NotFound(
            f"this invitation no longer holds: {row['invited_by']}, who sent it, may no longer "
            f"invite you as {row['role']} to {row['organization_name']}. "
            "Ask one of its owners for a new invitation"
        )
    member = await _one(conn, "member_by_email", {"email": row["address"]})
    return {**row, "has_password": bool(member and member["password_hash"])}


async def accept_invitation(
    conn: Conn,
    token: str,
    *,
    password: str,
    code: str,
    cost: PasswordHashCost,
    now: datetime,
    origin: Origin,
) -> tuple[str, str]:
    """Use an invitation once: a new member sets their password, an existing one proves
    theirs (and their TOTP code); they join with the invitation's role, recorded as
    `member.joined` by the member from `origin` in the same transaction. The member's id
    and the organization's."""
    async with conn.transaction():
        invitation = await open_invitation(conn, token, now=now)
        member = await _one(conn, "member_by_email", {"email": invitation["address"]})
        if member is not None and member["password_hash"]:
            member_id = await _check_credentials(conn, member, password, code, cost, now)
        else:
            hashed = await hash_password(checked_password(password), cost)
            if member is None:
                member_id = new_id("mem")
                await conn.execute(
                    queries["insert_member"],
                    {"id": member_id, "email": invitation["address"], "password_hash": hashed},
                )
            else:
                member_id = member["id"]
                await conn.execute(
                    queries["set_member_password"],
                    {"id": member_id, "password_hash": hashed, "now": now},
                )
        if await _one(conn, "accept_invitation", {"id": invitation["id"], "now": now}) is None:
            raise NotFound("this invitation was used, withdrawn, has expired, or does not exist")
        await conn.execute(
            queries["insert_membership"],
            {
                "organization_id": invitation["organization_id"],
                "member_id": member_id,
                "role": invitation["role"],
            },
        )
        joined = Actor("member", member_id, invitation["address"], invitation["role"])
        acting = Acting(OrgScope(invitation["organization_id"]), joined, origin)
        await acting.record(conn, "member.joined", member_id)
    return member_id, invitation["organization_id"]


# --- signing in ---------------------------------------------------------------------------


async def _accept_totp(conn: Conn, member_id: str, secret: str, code: str, now: datetime) -> bool:
    """Whether `code` is a code of the secret later than the last one accepted for the
    member; its step is then recorded, in the statement that accepts it, so a code works
    once (two clients sending it at once included) and an older one never again."""
    step = totp_step(secret, code, now)
    if step is None:
        return False
    return await _one(conn, "accept_totp_step", {"id": member_id, "step": step}) is not None


async def _check_credentials(
    conn: Conn,
    member: dict[str, Any] | None,
    password: str,
    code: str,
    cost: PasswordHashCost,
    now: datetime,
) -> str:
    """The member's id when the password (and, with TOTP on, a code not used before or an
    unused recovery code, either then used up) is right; else Unauthenticated."""
    stored = member["password_hash"] if member else None
    if not await password_matches(stored, password, cost) or member is None:
        raise Unauthenticated(_WRONG)
    secret = member["totp_secret"]
    if secret is None:
        return str(member["id"])
    if not code.strip():
        raise Unauthenticated("enter the code from your authenticator app, or a recovery code")
    if await _accept_totp(conn, member["id"], secret, code, now):
        return str(member["id"])
    used = await _one(
        conn, "use_recovery_code", {"id": member["id"], "code_hash": recovery_hash(code)}
    )
    if used is None:
        raise Unauthenticated("that code is not right")
    return str(member["id"])


async def sign_in_account(conn: Conn, email: str) -> str:
    """What a sign-in with this address is throttled as: the member whose address it is (in
    any case), or the address itself when it is no member's, counted alike."""
    email = email.strip()[:320]
    member = await _one(conn, "member_by_email", {"email": email})
    return f"member {member['id']}" if member else f"address {email.lower()}"


async def check_sign_in(
    conn: Conn, *, email: str, password: str, code: str, cost: PasswordHashCost, now: datetime
) -> tuple[str, str]:
    """The member and their first organization, for a right email, password and code;
    anything else is Unauthenticated, without saying whether the address is a member's."""
    member = await _one(conn, "member_by_email", {"email": email.strip()[:320]})
    member_id = await _check_credentials(conn, member, password, code, cost, now)
    return member_id, await first_organization(conn, member_id)


async def record_sign_in(
    conn: Conn, *, member_id: str, organization_id: str | None, origin: Origin
) -> None:
    """Record a sign-in in the caller's transaction: `member.signed_in` in the organization
    its session opens in (`organization_id`), or, with none, `member.sign_in_failed` in each
    of the member's organizations (at most SIGN_IN_FAILURES_RECORDED: a failed sign-in
    names a member only when the address is one's). The subject is the member; the actor
    is the account signed in to (for a failure, the one tried), never the password."""
    member = await _one(conn, "member_by_id", {"id": member_id})
    if member is None:
        return
    action = "member.sign_in_failed" if organization_id is None else "member.signed_in"
    organizations = await member_organizations(conn, member_id)
    for organization in organizations[:SIGN_IN_FAILURES_RECORDED]:
        if organization_id is not None and organization["id"] != organization_id:
            continue
        actor = Actor("member", member_id, member["address"], organization["role"])
        await Acting(OrgScope(organization["id"]), actor, origin).record(conn, action, member_id)


async def member_by_address(conn: Conn, email: str) -> str | None:
    """The id of the member whose address `email` is (in any case), if any."""
    member = await _one(conn, "member_by_email", {"email": email.strip()[:320]})
    return None if member is None else str(member["id"])


async def first_organization(conn: Conn, member_id: str) -> str:
    """The organization a member's session opens in: the first they joined."""
    organizations = await member_organizations(conn, member_id)
    if not organizations:
        raise Unauthenticated("you no longer belong to any organization")
    return str(organizations[0]["id"])


async def member_organizations(conn: Conn, member_id: str) -> list[dict[str, Any]]:
    cur = await conn.execute(queries["member_organizations"], {"member_id": member_id})
    return await cur.fetchall()


# --- one-time links: resets, the first owner, `postbag dev` -------------------------------


async def _link(
    conn: Conn, member_id: str, kind: MemberLinkKind, lifetime: timedelta, now: datetime
) -> str:
    token = new_token()
    await conn.execute(
        queries["insert_member_link"],
        {
            "token_hash": token_hash(token),
            "member_id": member_id,
            "kind": kind,
            "expires_at": now + lifetime,
        },
    )
    return token


async def request_password_reset(services: Services, email: str) -> None:
    """Queue a one-time reset link (valid 1 hour) to a member's address, as an outbox email
    (kind `account`, in their first organization), within RESET_BOUND requests for the
    address per RESET_WINDOW; anything else queues nothing.

    The same work whatever the address (a token sealed, one statement that writes the
    address's count), no email sent and no password hashed here, so neither the answer nor
    its time says who is a member.
    """
    email = email.strip()[:320]
    key = services.settings.require_secret_key()
    delivery_id, nonce = new_id("dlv"), new_token()
    token = sealed_token(key, nonce)
    payload = {
        "event": ACCOUNT_EVENT,
        "subject": "Reset your Postbag password",
        "text": "Someone asked to reset the password of this address on Postbag.\n\n"
        f"Set a new one within the hour (the link works once):\n{LINK_MARK}\n\n"
        "If it was not you, ignore this email: your password stays as it is.\n",
        "link": {"path": "/app/reset/", "nonce": nonce},
    }
    now = utcnow()
    async with services.db.connection() as conn:
        await conn.execute(
            queries["queue_password_reset"],
            {
                "email": email,
                "recipient_hash": reset_address_hash(key, email),
                "id": delivery_id,
                "token_hash": token_hash(token),
                "payload": Jsonb(payload),
                "bound": RESET_BOUND,
                "window": RESET_WINDOW,
                "now": now,
                "expires_at": now + RESET_LIFETIME,
            },
        )


async def reset_link_is_live(conn: Conn, token: str, *, now: datetime) -> bool:
    row = await _one(
        conn,
        "live_member_link",
        {"token_hash": token_hash(token), "kind": "password_reset", "now": now},
    )
    return row is not None


async def reset_password(
    conn: Conn, token: str, *, password: str, cost: PasswordHashCost, now: datetime, origin: Origin
) -> tuple[str, str, bool]:
    """Use a reset link once to set a new password; every session of the member ends. The
    member's id, the organization they sign in to, and whether they have a second factor
    (then they sign in again with it; without one the reset signs them in, recorded as
    `member.password_reset` by the member from `origin` in the same transaction)."""
    hashed = await hash_password(checked_password(password), cost)
    async with conn.transaction():
        used = await _one(
            conn,
            "use_member_link",
            {"token_hash": token_hash(token), "kind": "password_reset", "now": now},
        )
        if used is None:
            raise NotFound("this link was used, has expired, or does not exist")
        member_id = used["member_id"]
        await conn.execute(
            queries["set_member_password"], {"id": member_id, "password_hash": hashed, "now": now}
        )
        await conn.execute(queries["delete_all_member_sessions"], {"member_id": member_id})
        member = await _one(conn, "member_by_id", {"id": member_id})
        assert member is not None
        organization_id = await first_organization(conn, member_id)
        two_factor = member["totp_secret"] is not None
        if not two_factor:
            role = await _one(
                conn,
                "membership_role",
                {"organization_id": organization_id, "member_id": member_id},
            )
            assert role is not None
            reset = Actor("member", member_id, member["address"], role["role"])
            await Acting(OrgScope(organization_id), reset, origin).record(
                conn, "member.password_reset", member_id
            )
    return member_id, organization_id, two_factor


async def use_sign_in_link(conn: Conn, token: str, *, now: datetime) -> str:
    """The member a `postbag dev` sign-in link signs in, once; NotFound after."""
    used = await _one(
        conn, "use_member_link", {"token_hash": token_hash(token), "kind": "sign_in", "now": now}
    )
    if used is None:
        raise NotFound("this sign-in link was used, has expired, or does not exist")
    return str(used["member_id"])


async def _member_for(conn: Conn, email: str) -> dict[str, Any]:
    """The member with this address, made (without a password) when there is none."""
    await conn.execute(
        queries["insert_member"], {"id": new_id("mem"), "email": email, "password_hash": None}
    )
    member = await _one(conn, "member_by_email", {"email": email})
    assert member is not None
    return member


@scoped
async def add_first_owner(conn: Conn, scope: OrgScope, *, email: str, now: datetime) -> str | None:
    """Make `email` an owner of the new organization (`postbag create-org --owner-email`):
    the token of a one-time link (7 days) to set their password, or None when the address
    is already a member's with a password (they sign in with it)."""
    email = checked_email(email)
    member = await _member_for(conn, email)
    await conn.execute(
        queries["insert_membership"],
        {"organization_id": scope.organization_id, "member_id": member["id"], "role": "owner"},
    )
    if member["password_hash"]:
        return None
    return await _link(conn, member["id"], "password_reset", FIRST_OWNER_LINK_LIFETIME, now)


async def local_owner_link(conn: Conn, *, now: datetime) -> str | None:
    """The token of a one-time sign-in link for the installation's first owner (`postbag
    dev`); when the oldest organization has no owner yet, the local owner is made first.
    None on an installation without organizations."""
    async with conn.transaction():
        owner = await _one(conn, "first_owner", {})
        if owner is None:
            orgs = await (await conn.execute(queries["list_organizations"], {})).fetchall()
            if not orgs:
                return None
            member = await _member_for(conn, LOCAL_OWNER_EMAIL)
            await conn.execute(
                queries["insert_membership"],
                {"organization_id": orgs[0]["id"], "member_id": member["id"], "role": "owner"},
            )
            member_id = member["id"]
        else:
            member_id = owner["member_id"]
        return await _link(conn, member_id, "sign_in", SIGN_IN_LINK_LIFETIME, now)


# --- a member's own account: TOTP ---------------------------------------------------------


async def two_factor_state(conn: Conn, member_id: str) -> dict[str, Any]:
    """Whether TOTP is on, a secret waiting to be confirmed, and recovery codes left."""
    member = await _one(conn, "member_by_id", {"id": member_id})
    assert member is not None
    left = await _one(conn, "count_recovery_codes", {"id": member_id})
    assert left is not None
    return {
        "on": member["totp_secret"] is not None,
        "pending": member["totp_pending"],
        "address": member["address"],
        "recovery_codes_left": left["n"],
    }


async def start_totp(conn: Conn, member_id: str) -> str:
    """A new secret to set up (shown to the member once, as a URI); it counts when confirmed."""
    secret = new_totp_secret()
    await conn.execute(queries["set_totp_pending"], {"id": member_id, "secret": secret})
    return secret


async def confirm_totp(conn: Conn, member_id: str, code: str, *, now: datetime) -> list[str]:
    """Turn TOTP on once a code of the pending secret is right (and accepted as a sign-in's
    is: it cannot sign in afterwards); the recovery codes, shown once (only their hashes are
    kept)."""
    async with conn.transaction():
        member = await _one(conn, "member_by_id", {"id": member_id})
        assert member is not None
        pending = member["totp_pending"]
        if pending is None or not await _accept_totp(conn, member_id, pending, code, now):
            raise InvalidInput(
                "that code is not right; check the app's clock and try the next code",
                [{"field": "code", "message": "not right"}],
            )
        await conn.execute(queries["confirm_totp"], {"id": member_id, "secret": pending})
        codes = new_recovery_codes()
        await conn.execute(
            queries["replace_recovery_codes"],
            {"id": member_id, "hashes": [recovery_hash(c) for c in codes]},
        )
    return codes


async def turn_on_two_factor(change: Change, code: str) -> list[str]:
    """Turn TOTP on for the acting member (`confirm_totp`); the recovery codes."""
    member_id = change.subject = change.acting.actor.id
    async with change.member_wide() as conn:
        return await confirm_totp(conn, member_id, code, now=utcnow())


async def turn_off_totp(
    conn: Conn, member_id: str, *, password: str, cost: PasswordHashCost
) -> None:
    """Turn TOTP off (and drop the recovery codes), once the password is right."""
    member = await _one(conn, "member_by_id", {"id": member_id})
    assert member is not None
    if not await password_matches(member["password_hash"], password, cost):
        raise Unauthenticated("that password is not right")
    await conn.execute(queries["clear_totp"], {"id": member_id})


async def turn_off_two_factor(change: Change, *, password: str, cost: PasswordHashCost) -> None:
    """Turn TOTP off for the acting member, once their password is right."""
    member_id = change.subject = change.acting.actor.id
    async with change.member_wide() as conn:
        await turn_off_totp(conn, member_id, password=password, cost=cost)
