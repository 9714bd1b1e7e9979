"""Organizations, their plans, and API keys (stored only as a SHA-256 hash)."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.owner.changes import Change
from core.owner.plans import PLAN_NAMES
from core.owner.roles import Actor, require_rank
from core.owner.usage import reserve
from core.platform.db import Conn
from core.platform.errors import InvalidInput, NotFound, Unauthenticated
from core.platform.ids import new_id
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.platform.vocabulary import Role

KEY_PREFIX = "pb_"


@dataclass(frozen=True, slots=True)
class NewKey:
    """An API key as shown once, at creation; only its hash is stored."""

    id: str
    name: str
    prefix: str
    role: Role
    secret: str
    created_at: datetime


def hash_key(key: str) -> bytes:
    """The stored form of an API key (keys are 256-bit random, so a plain hash suffices)."""
    return hashlib.sha256(key.encode()).digest()


def _check_plan(plan: str) -> None:
    if plan not in PLAN_NAMES:
        raise InvalidInput(
            f"unknown plan {plan!r}; one of {', '.join(PLAN_NAMES)}",
            [{"field": "plan", "message": "unknown plan"}],
        )


async def create_organization(conn: Conn, *, name: str, plan: str = "free") -> OrgScope:
    """Create an organization; return its scope."""
    _check_plan(plan)
    row = await (
        await conn.execute(
            queries["insert_organization"], {"id": new_id("org"), "name": name, "plan": plan}
        )
    ).fetchone()
    assert row is not None
    return OrgScope(row["id"])


async def set_plan(conn: Conn, *, organization_id: str, plan: str) -> None:
    """Move an organization to another plan."""
    _check_plan(plan)
    cur = await conn.execute(queries["set_plan"], {"id": organization_id, "plan": plan})
    if await cur.fetchone() is None:
        raise NotFound(f"no organization {organization_id}")


async def change_plan(change: Change, plan: str) -> None:
    """Move the change's organization to `plan` (the operator's `postbag set-plan`); the
    audit row names the plan."""
    async with change as conn:
        await set_plan(conn, organization_id=change.scope.organization_id, plan=plan)
        change.subject = plan


async def list_organizations(conn: Conn) -> list[dict[str, Any]]:
    """Every organization (id, name, plan, created_at), oldest first: the operator's view."""
    return await (await conn.execute(queries["list_organizations"], {})).fetchall()


async def organization_scope(conn: Conn, organization_id: str) -> OrgScope:
    """The scope of an existing organization; an unknown id is NotFound."""
    cur = await conn.execute(queries["get_organization"], {"id": organization_id})
    if await cur.fetchone() is None:
        raise NotFound(f"no organization {organization_id}")
    return OrgScope(organization_id)


async def owner_of(
    conn: Conn, *, form_id: str | None = None, destination_id: str | None = None
) -> OrgScope:
    """The scope of the organization a live form (or destination) belongs to, looked up
    across organizations by the operator; an unknown id is NotFound."""
    if form_id is not None:
        cur = await conn.execute(queries["owner_of_form"], {"id": form_id})
        missing = f"no form {form_id}"
    else:
        cur = await conn.execute(queries["owner_of_destination"], {"id": destination_id})
        missing = f"no destination {destination_id}"
    row = await cur.fetchone()
    if row is None:
        raise NotFound(missing)
    return OrgScope(row["organization_id"])


@scoped
async def create_api_key(
    conn: Conn, scope: OrgScope, *, name: str, role: Role = "admin", by: Actor | None = None
) -> NewKey:
    """Make a key with `role` for the organization; the secret is returned here and never
    again. An actor `by` (none: the operator) may not make a key above its own role.

    Refused with PlanLimitReached past the plan's live keys (revoked ones do not count).
    """
    if by is not None:
        require_rank(by, role)
    await reserve(conn, scope, kind="api_keys")
    secret = KEY_PREFIX + secrets.token_urlsafe(32)
    row = await (
        await conn.execute(
            queries["insert_api_key"],
            {
                "id": new_id("key"),
                "organization_id": scope.organization_id,
                "name": name,
                "prefix": secret[:10],
                "key_hash": hash_key(secret),
                "role": role,
            },
        )
    ).fetchone()
    assert row is not None
    return NewKey(
        id=row["id"],
        name=row["name"],
        prefix=row["prefix"],
        role=row["role"],
        secret=secret,
        created_at=row["created_at"],
    )


async def create_key(change: Change, *, name: str, role: Role) -> NewKey:
    """Make a key with `role` as the change's actor (not above its own role)."""
    async with change as conn:
        key = await create_api_key(conn, change.scope, name=name, role=role, by=change.acting.actor)
        change.subject = key.id
    return key


async def authenticate_key(conn: Conn, key: str | None) -> tuple[OrgScope, Actor]:
    """The scope of a live API key and the key as an actor (its id, name and role); any
    other key, or none, is Unauthenticated."""
    if not key or not key.startswith(KEY_PREFIX) or len(key) > 200:
        raise Unauthenticated("a valid API key is required")
    cur = await conn.execute(queries["authenticate_api_key"], {"key_hash": hash_key(key)})
    row = await cur.fetchone()
    if row is None:
        raise Unauthenticated("a valid API key is required")
    return OrgScope(row["organization_id"]), Actor("key", row["id"], row["name"], row["role"])


async def authenticate(conn: Conn, key: str | None) -> OrgScope:
    """The scope of a live API key; any other key, or none, is Unauthenticated."""
    scope, _ = await authenticate_key(conn, key)
    return scope


@scoped
async def list_api_keys(
    conn: Conn, scope: OrgScope, *, after: str | None, limit: int
) -> list[dict[str, Any]]:
    """Up to `limit` live keys (prefix and name, never a hash) with ids after `after`."""
    cur = await conn.execute(
        queries["list_api_keys"],
        {"organization_id": scope.organization_id, "after": after, "limit": limit},
    )
    return await cur.fetchall()


@scoped
async def revoke_api_key(
    conn: Conn, scope: OrgScope, *, key_id: str, by: Actor | None = None
) -> None:
    """Revoke a live key at once: the next request made with it is refused. An actor `by`
    may not revoke a key above its own role."""
    params = {"id": key_id, "organization_id": scope.organization_id}
    found = await (await conn.execute(queries["live_api_key_role"], params)).fetchone()
    if found is None:
        raise NotFound(f"no key {key_id}")
    if by is not None:
        require_rank(by, found["role"])
    cur = await conn.execute(
        queries["revoke_api_key"], {"id": key_id, "organization_id": scope.organization_id}
    )
    if await cur.fetchone() is None:
        raise NotFound(f"no key {key_id}")


async def revoke_key(change: Change, key_id: str) -> None:
    """Revoke a key as the change's actor (not one above its own role)."""
    async with change as conn:
        await revoke_api_key(conn, change.scope, key_id=key_id, by=change.acting.actor)
