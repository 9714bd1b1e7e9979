"""Plan limits at creation, and the organization's usage this month."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Literal

from core.owner.plans import PLANS, Plan
from core.platform.clock import month_of
from core.platform.db import Conn
from core.platform.errors import PlanLimitReached
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped

CountedKind = Literal["forms", "destinations", "api_keys", "streams"]

_COUNT_QUERY: dict[CountedKind, str] = {
    "forms": "count_live_forms",
    "destinations": "count_live_destinations",
    "api_keys": "count_live_api_keys",
    "streams": "count_live_streams",
}
_LABEL: dict[CountedKind, str] = {
    "forms": "forms",
    "destinations": "destinations",
    "api_keys": "live API keys",
    "streams": "streams",
}


@dataclass(frozen=True, slots=True)
class Usage:
    """What the organization uses this calendar month, against its plan."""

    plan: Plan
    month: date
    submissions: int
    attachment_bytes: int
    review_bytes: int
    forms: int
    destinations: int
    api_keys: int
    streams: int
    events: int


def _limit(plan: Plan, kind: CountedKind) -> int | None:
    if kind == "forms":
        return plan.max_forms
    if kind == "destinations":
        return plan.max_destinations
    if kind == "streams":
        return plan.max_streams
    return plan.max_api_keys


async def _count(conn: Conn, scope: OrgScope, kind: CountedKind) -> int:
    cur = await conn.execute(
        queries[_COUNT_QUERY[kind]], {"organization_id": scope.organization_id}
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row["n"])


async def _locked_plan(conn: Conn, scope: OrgScope) -> Plan:
    cur = await conn.execute(
        queries["lock_organization_plan"], {"organization_id": scope.organization_id}
    )
    row = await cur.fetchone()
    assert row is not None, "the authenticated organization is visible in its own scope"
    return PLANS[row["plan"]]


@scoped
async def reserve(conn: Conn, scope: OrgScope, *, kind: CountedKind) -> None:
    """Refuse with PlanLimitReached when one more `kind` would exceed the plan.

    Locks the organization's row until the transaction ends, so two concurrent creations
    cannot both take the last free slot.
    """
    plan = await _locked_plan(conn, scope)
    limit = _limit(plan, kind)
    if limit is not None and await _count(conn, scope, kind) >= limit:
        raise PlanLimitReached(f"the {plan.name} plan allows {limit} {_LABEL[kind]}")


async def reserve_attachment_bytes(
    conn: Conn, *, organization_id: str, plan: Plan, size: int, now: datetime
) -> None:
    """Count `size` attachment bytes against this month's, or refuse with PlanLimitReached
    when they would exceed the plan's (one statement: concurrent uploads cannot overshoot).

    Runs on the submit path, as the owner, before the files are written.
    """
    limit = plan.monthly_attachment_bytes
    if limit is not None and size > limit:
        raise PlanLimitReached(f"the {plan.name} plan allows {limit} attachment bytes a month")
    cur = await conn.execute(
        queries["add_attachment_bytes"],
        {
            "organization_id": organization_id,
            "month": month_of(now),
            "bytes": size,
            "limit": limit,
        },
    )
    if await cur.fetchone() is None:
        raise PlanLimitReached(
            f"this month's attachments would exceed the {plan.name} plan's {limit} bytes"
        )


@scoped
async def get_usage(conn: Conn, scope: OrgScope, *, now: datetime) -> Usage:
    """This month's counters and the live forms, destinations and keys, with the plan."""
    month = month_of(now)
    params = {"organization_id": scope.organization_id, "month": month}
    row = await (await conn.execute(queries["organization_plan"], params)).fetchone()
    assert row is not None, "the authenticated organization is visible in its own scope"
    counted = await (await conn.execute(queries["month_usage"], params)).fetchone()
    assert counted is not None
    return Usage(
        plan=PLANS[row["plan"]],
        month=month,
        submissions=int(counted["submissions"]),
        attachment_bytes=int(counted["attachment_bytes"]),
        review_bytes=int(counted["review_bytes"]),
        forms=await _count(conn, scope, "forms"),
        destinations=await _count(conn, scope, "destinations"),
        api_keys=await _count(conn, scope, "api_keys"),
        streams=await _count(conn, scope, "streams"),
        events=int(counted["events"]),
    )
