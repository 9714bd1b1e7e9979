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

CountedKind = Literal["forms", "destinations"]

_COUNT_QUERY: dict[CountedKind, str] = {
    "forms": "count_live_forms",
    "destinations": "count_live_destinations",
}


@dataclass(frozen=True, slots=True)
class Usage:
    """What the organization uses this calendar month, against its plan."""

    plan: Plan
    month: date
    submissions: int
    forms: int
    destinations: int


async def _count(conn: Conn, scope: OrgScope, kind: CountedKind) -> int:
    cur = await conn.execute(
        queries[_COUNT_QUERY[kind]], {"organization_id": scope.organization_id}
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row["n"])


@scoped
async def reserve(conn: Conn, scope: OrgScope, *, kind: CountedKind) -> None:
    """Refuse with PlanLimitReached when one more `kind` would exceed the plan.

    Locks the organization's row until the transaction ends, so two concurrent creations
    cannot both take the last free slot.
    """
    cur = await conn.execute(
        queries["lock_organization_plan"], {"organization_id": scope.organization_id}
    )
    row = await cur.fetchone()
    assert row is not None, "the authenticated organization is visible in its own scope"
    plan = PLANS[row["plan"]]
    limit = plan.max_forms if kind == "forms" else plan.max_destinations
    if limit is not None and await _count(conn, scope, kind) >= limit:
        raise PlanLimitReached(f"the {plan.name} plan allows {limit} {kind}")


@scoped
async def get_usage(conn: Conn, scope: OrgScope, *, now: datetime) -> Usage:
    """This month's counted submissions and the live forms and destinations, with the plan."""
    month = month_of(now)
    params = {"organization_id": scope.organization_id, "month": month}
    row = await (await conn.execute(queries["organization_plan"], params)).fetchone()
    assert row is not None, "the authenticated organization is visible in its own scope"
    counted = await (await conn.execute(queries["month_submissions"], params)).fetchone()
    assert counted is not None
    return Usage(
        plan=PLANS[row["plan"]],
        month=month,
        submissions=int(counted["n"]),
        forms=await _count(conn, scope, "forms"),
        destinations=await _count(conn, scope, "destinations"),
    )
