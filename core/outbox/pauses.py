"""Destinations that pause themselves (docs/delivery.md#destinations-that-pause-themselves).

A destination the storm breaker has held `failing` for its window (`pause_after_hours`,
24 by default), whose attempts in that window, at least `pause_after_attempts` (10) of
them, all failed, is paused with reason `failing` by the retention tick: one statement a
pass, which writes the `destination.paused` event and the owner's notice with it. A tick
rather than the outcome path: the sends pay nothing for it, and one statement that
re-checks `enabled` under the row lock cannot race the owner or another worker. Each pause
opens a `destination.paused` alert in the same transaction (the Alerts page); resuming
resolves it.

While it is paused its deliveries wait: a claim of one is given back with its attempt
unspent and parked, with the destination's other due deliveries, for the longest backoff,
so none is sent, none spends an attempt and none ends dead. Resuming
(core/owner/destinations.py) queues them at once.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from core.outbox import store
from core.outbox.backoff import MAX_DELAY
from core.outbox.store import Claim
from core.owner import hooks
from core.owner.alerts import raise_alert
from core.platform.db import Conn
from core.platform.queries import queries
from core.platform.scope import OrgScope

if TYPE_CHECKING:
    from core.outbox.passes import PassState

# The detail a waiting delivery shows.
WAITING = "destination_paused"


def waits(claim: Claim) -> bool:
    """Whether `claim` is for a destination that paused itself (and is not removed)."""
    return claim.destination_paused_reason == "failing" and claim.destination_deleted_at is None


async def park(claim: Claim, state: PassState) -> None:
    """Give `claim` back unspent and park it with its destination's due deliveries."""
    assert claim.destination_id is not None
    now = state.now()
    until = now + timedelta(seconds=MAX_DELAY)
    async with state.services.db.connection() as conn:
        await store.release(
            conn, claim, now=now, throttled=True, next_attempt_at=until, detail=WAITING
        )
        parked = await store.park_due(
            conn, claim.destination_id, now=now, until=until, detail=WAITING
        )
    state.stats["waiting"] += 1 + parked


def pause_detail(attempts: int, hours: int, threshold: int) -> str:
    """Why a destination paused itself, in the owner's own figures."""
    return (
        f"paused itself: {attempts} attempt{'s' if attempts != 1 else ''} in {hours} h, "
        f"none sent (it pauses after {threshold} failed in {hours} h)"
    )


async def pause_failing(conn: Conn, *, now: datetime) -> int:
    """Note when each destination turned `failing`, then pause those failing for their
    window, each with its alert, queuing the `destination.paused` body to the hooks
    subscribed to it; returns how many were paused."""
    await conn.execute(queries["track_failing_since"], {"now": now})
    # The pause, its alert and its hooks' deliveries commit together.
    async with conn.transaction():
        cur = await conn.execute(queries["pause_failing_destinations"], {"now": now})
        paused = await cur.fetchall()
        for row in paused:
            await raise_alert(
                conn,
                organization_id=row["organization_id"],
                kind="destination.paused",
                subject_id=row["id"],
                detail=pause_detail(
                    row["attempts"], row["pause_after_hours"], row["pause_after_attempts"]
                ),
                delivery_id=None,
                now=now,
            )
            await hooks.queue_lifecycle(
                conn,
                OrgScope(row["organization_id"]),
                event="destination.paused",
                data={"destination": row["id"], "reason": "failing"},
                now=now,
            )
    return len(paused)
