"""Deliveries as the management API shows them, and retry by hand."""

from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Any

from core.outbox.wakeup import wake_deliveries
from core.owner.changes import Change
from core.platform.db import Conn
from core.platform.errors import (
    DeliveryInProgress,
    DeliveryNotRetryable,
    DestinationPaused,
    DestinationRemoved,
    NotFound,
    ValuesErased,
    ValuesExpired,
)
from core.platform.queries import queries
from core.platform.scope import OrgScope, scoped
from core.platform.services import Services
from core.platform.vocabulary import DeliveryStatus

RETRYABLE_STATUSES: frozenset[DeliveryStatus] = frozenset({"failed", "dead", "skipped"})


def _public(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": row["id"],
        "submission": row["submission_id"],
        "destination": row["destination_id"],
        "kind": row["kind"],
        "channel": row["channel"],
        "status": row["status"],
        "reason": row["reason"],
        "attempts": row["attempts"],
        "next_attempt_at": row["next_attempt_at"],
        "last_detail": row["last_detail"],
        "created_at": row["created_at"],
        "sent_at": row["sent_at"],
    }


@scoped
async def list_deliveries(
    conn: Conn,
    scope: OrgScope,
    *,
    status: str | None,
    destination: str | None,
    submission: str | None,
    before: str | None,
    limit: int,
) -> list[dict[str, Any]]:
    """A page of the organization's deliveries, newest first."""
    cur = await conn.execute(
        queries["list_deliveries"],
        {
            "organization_id": scope.organization_id,
            "status": status,
            "destination": destination,
            "submission": submission,
            "before": before,
            "limit": limit,
        },
    )
    return [_public(row) for row in await cur.fetchall()]


@scoped
async def get_delivery(conn: Conn, scope: OrgScope, delivery_id: str) -> dict[str, Any]:
    """One delivery with every attempt; another organization's is NotFound."""
    params = {"id": delivery_id, "organization_id": scope.organization_id}
    row = await (await conn.execute(queries["get_delivery"], params)).fetchone()
    if row is None:
        raise NotFound(f"no delivery {delivery_id}")
    found = _public(row)
    found["max_attempts"] = row["max_attempts"]
    cur = await conn.execute(queries["list_attempts"], params)
    found["history"] = [dict(attempt) for attempt in await cur.fetchall()]
    return found


@scoped
async def requeue_delivery(
    conn: Conn, scope: OrgScope, delivery_id: str, *, now: datetime
) -> dict[str, Any]:
    """Queue a failed, dead or skipped delivery again now: same id, receipt and template,
    attempts reset; its attempt goes to the destination as it is then (the claim aims it).
    The caller wakes the deliverers once it has committed (`wake_deliveries`).

    Refused, changing nothing, while it is being sent under a live lease, when its values
    are erased or expired, or its destination paused or removed.
    """
    params = {"id": delivery_id, "organization_id": scope.organization_id}
    row = await (await conn.execute(queries["lock_delivery_for_retry"], params)).fetchone()
    if row is None:
        raise NotFound(f"no delivery {delivery_id}")
    if row["status"] == "sending" and row["claimed_until"] > now:
        raise DeliveryInProgress(f"{delivery_id} is being sent right now")
    # What it sends: a submission's values, or a stream event's data.
    source = row["submission_id"] or row["event_id"]
    if source is not None:
        if row["erased_at"] is not None:
            raise ValuesErased(f"the values of {source} were erased")
        if row["erase_at"] is not None and row["erase_at"] <= now:
            raise ValuesExpired(f"the values of {source} have expired")
    if row["destination_id"] is not None:
        if row["destination_deleted_at"] is not None:
            raise DestinationRemoved(f"destination {row['destination_id']} was removed")
        if not row["destination_enabled"]:
            raise DestinationPaused(f"destination {row['destination_id']} is paused")
    if row["status"] not in RETRYABLE_STATUSES and row["status"] != "sending":
        raise DeliveryNotRetryable(f"{delivery_id} is {row['status']}; nothing to retry")
    await conn.execute(queries["requeue_delivery"], {**params, "now": now})
    return await get_delivery(conn, scope, delivery_id)


async def retry_delivery(
    change: Change,
    services: Services,
    delivery_id: str,
    *,
    now: datetime,
    submission_id: str | None = None,
) -> dict[str, Any]:
    """Retry a delivery by hand (`requeue_delivery`) as the change, one of `submission_id`'s
    when given (another is NotFound); the deliverers wake once it has committed."""
    async with change as conn:
        if submission_id is not None:
            found = await get_delivery(conn, change.scope, delivery_id)
            if found["submission"] != submission_id:
                raise NotFound(f"no delivery {delivery_id}")
        retried = await requeue_delivery(conn, change.scope, delivery_id, now=now)
        change.after_commit(partial(wake_deliveries, services))
    return retried
