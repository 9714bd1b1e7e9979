"""Who acts in an organization, and what each role may do: one table, one check.

Every request inside an organization runs for an `Actor` (a member signed in to the
dashboard, or an API key); each has one role. A route or tool names the `Permission` it
needs; `require` refuses a role that may not act with `403 forbidden` naming the least role
that may (docs/teams.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from core.platform.errors import Forbidden
from core.platform.vocabulary import AuditActorKind, Role

# Most powerful first: a role may do whatever a role after it may.
ROLES: tuple[Role, ...] = get_args(Role)

Permission = Literal[
    # forms, streams, destinations (without targets), routes, statuses, delivery states, counts
    "read",
    # submission values, receipts, attachments, exports, delivery history, destination targets
    "read_values",
    # send again, replay, erase, release, mark spam
    "operate",
    # change forms, schemas, destinations, routes, streams, keys, spam settings, alerts
    "configure",
    # members, roles, the plan, ownership
    "manage_members",
    # the audit trail: who did what, when, from where (never values)
    "read_audit",
]

# The least role holding each permission.
LEAST_ROLE: dict[Permission, Role] = {
    "read": "viewer",
    "read_values": "operator",
    "operate": "operator",
    "configure": "admin",
    "manage_members": "owner",
    "read_audit": "admin",
}


@dataclass(frozen=True, slots=True)
class Actor:
    """Who a request acts for: a member or an API key (or the operator at the command line),
    with its role in the organization."""

    kind: AuditActorKind
    id: str
    name: str
    role: Role


def may(role: Role, permission: Permission) -> bool:
    """Whether `role` holds `permission`."""
    return ROLES.index(role) <= ROLES.index(LEAST_ROLE[permission])


def require(actor: Actor, permission: Permission) -> None:
    """Refuse, with the least role that may, an actor whose role lacks `permission`."""
    if not may(actor.role, permission):
        needed = LEAST_ROLE[permission]
        raise Forbidden(f"this needs the {needed} role; yours is {actor.role}", needed=needed)


def outranks(role: Role, other: Role) -> bool:
    """Whether `role` holds everything `other` holds (itself included)."""
    return ROLES.index(role) <= ROLES.index(other)


def require_rank(actor: Actor, role: Role) -> None:
    """Refuse an actor that would hand out or take away a role above its own (a key's role,
    a member's): 403 naming that role."""
    if not outranks(actor.role, role):
        raise Forbidden(f"this needs the {role} role; yours is {actor.role}", needed=role)
