"""Per-destination rate limits (docs/delivery.md#rate-limits): a token bucket on each
destination's row, which the claim refills and spends under the row's lock, so that all the
workers together hold one rate; a 429 lowers the rate for a while, for every worker too.

The bucket holds one second's sends (at least one): after a quiet spell a destination may
send `per_second` at once, then one every `1 / per_second` seconds, so any one second holds
at most `per_second` + its burst of `max(1, per_second)`. The figures (each type's rate, the
bounds of an owner's, how far a 429 lowers one and how fast it recovers) are the
destinations' (`core.destinations.rates`), which the owner's settings read too.
"""

from __future__ import annotations

from datetime import datetime

from core.destinations.rates import FLOOR, RECOVER, TYPE_RATES
from core.platform.db import Conn, Database
from core.platform.queries import queries


async def lower(
    db: Database,
    destination_id: str,
    *,
    now: datetime,
    started_at: datetime,
    retry_after: float | None,
) -> float | None:
    """After a 429 from `destination_id` to a send that began at `started_at`: halve its rate
    and hold its next send for `retry_after` seconds at least. Returns the new rate; None
    when it has no rate, or a 429 to a later send already lowered it."""
    async with db.connection() as conn:
        cur = await conn.execute(
            queries["lower_rate"],
            {
                "id": destination_id,
                "now": now,
                "started_at": started_at,
                "retry_after": retry_after,
                "floor": FLOOR,
                "recover": RECOVER,
                "type_rates": TYPE_RATES,
            },
        )
        row = await cur.fetchone()
    return None if row is None else float(row["rate"])


async def next_token_at(conn: Conn, *, now: datetime, since: datetime) -> datetime | None:
    """When the soonest empty bucket gets its next token, of those due after `since` whose
    destinations have deliveries due by `now`: rows the claim passed over for their rate
    may be claimable then."""
    cur = await conn.execute(queries["next_rate_token"], {"now": now, "since": since})
    row = await cur.fetchone()
    return None if row is None else row["at"]
