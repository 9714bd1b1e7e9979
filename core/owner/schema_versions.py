"""Schema versions, a form's and a stream's alike: append-only (the database refuses an
UPDATE), numbered 1..n under the holder's row lock, checked against the limits of
`core.schemas.limits` when saved, at most the plan's number per holder; adopting a version
appends a `manual` copy of it. One implementation over the holder (`FORM`, `STREAM`), whose
named statements (`core/sql/forms.sql`, `core/sql/streams.sql`) differ only in the table."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from psycopg.types.json import Jsonb

from core.owner.plans import PLANS
from core.platform.db import Conn
from core.platform.errors import NotFound, PlanLimitReached
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.platform.vocabulary import SchemaSource
from core.schemas.limits import check_schema


@dataclass(frozen=True, slots=True)
class Holder:
    """What holds schema versions, and its named statements."""

    noun: str
    # The statements' parameter naming the holder.
    key: str
    # The live holder (`id`), as the API shows it.
    live: str
    # Locks the live holder's row and reads its organization's plan.
    lock: str
    count: str
    insert: str
    get: str
    list: str


FORM = Holder(
    "form",
    "form_id",
    live="get_form",
    lock="lock_form_plan",
    count="count_form_schemas",
    insert="insert_form_schema",
    get="get_form_schema",
    list="list_form_schemas",
)
STREAM = Holder(
    "stream",
    "stream_id",
    live="get_stream",
    lock="lock_stream",
    count="count_stream_schemas",
    insert="insert_stream_schema",
    get="get_stream_schema",
    list="list_stream_schemas",
)


def versions_full(plan: str, versions: int) -> bool:
    """Whether a holder with `versions` schema versions has the plan's number already."""
    limit = PLANS[plan].max_schema_versions
    return limit is not None and versions >= limit


async def require_live(conn: Conn, scope: OrgScope, holder: Holder, holder_id: str) -> None:
    """NotFound unless the holder is live in the scope's organization."""
    params = {"id": holder_id, "organization_id": scope.organization_id}
    if await (await conn.execute(queries[holder.live], params)).fetchone() is None:
        raise NotFound(f"no {holder.noun} {holder_id}")


@scoped
async def append(
    conn: Conn,
    scope: OrgScope,
    holder: Holder,
    holder_id: str,
    schema: dict[str, Any],
    *,
    source: SchemaSource,
    event_type: str | None = None,
) -> dict[str, Any]:
    """Append the holder's next version; InvalidSchema past a limit of
    `core.schemas.limits`, PlanLimitReached once it has the plan's number of versions.
    `event_type` is a stream's (a form's versions have none)."""
    check_schema(schema)
    params = {"id": holder_id, "organization_id": scope.organization_id}
    # The row lock serialises appends, so two at once get versions n+1 and n+2; the count
    # is read after it, in a statement of its own (a later snapshot).
    locked = await (await conn.execute(queries[holder.lock], params)).fetchone()
    if locked is None:
        raise NotFound(f"no {holder.noun} {holder_id}")
    scoped_params = {holder.key: holder_id, "organization_id": scope.organization_id}
    count = await (await conn.execute(queries[holder.count], scoped_params)).fetchone()
    assert count is not None
    if versions_full(locked["plan"], int(count["n"])):
        limit = PLANS[locked["plan"]].max_schema_versions
        raise PlanLimitReached(
            f"the {locked['plan']} plan allows {limit} schema versions per {holder.noun}"
        )
    cur = await conn.execute(
        queries[holder.insert],
        {**scoped_params, "event_type": event_type, "schema": Jsonb(schema), "source": source},
    )
    row = await cur.fetchone()
    assert row is not None
    return row


@scoped
async def adopt(
    conn: Conn, scope: OrgScope, holder: Holder, holder_id: str, version: int
) -> dict[str, Any]:
    """Make a version (a suggestion, or an earlier version) current: append a `manual`
    copy of it (for its event type), checked as any schema the owner writes."""
    cur = await conn.execute(
        queries[holder.get],
        {holder.key: holder_id, "organization_id": scope.organization_id, "version": version},
    )
    row = await cur.fetchone()
    if row is None:
        raise NotFound(f"no schema version {version} of {holder.noun} {holder_id}")
    return await append(
        conn,
        scope,
        holder,
        holder_id,
        row["schema"],
        source="manual",
        event_type=row.get("event_type"),
    )


@scoped
async def page(
    conn: Conn, scope: OrgScope, holder: Holder, holder_id: str, *, after: int | None, limit: int
) -> list[dict[str, Any]]:
    """Up to `limit` versions of a live holder after version `after`, oldest first."""
    await require_live(conn, scope, holder, holder_id)
    cur = await conn.execute(
        queries[holder.list],
        {
            holder.key: holder_id,
            "organization_id": scope.organization_id,
            "after": after,
            "limit": limit,
        },
    )
    return await cur.fetchall()
