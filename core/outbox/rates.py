"""Per-destination rate limits (docs/delivery.md#rate-limits): a token bucket on each
destination's row, which the claim refills and spends under the row's lock, so that all the
workers together hold one rate; a 429 lowers the rate for a while, for every worker too.

The bucket holds one second's sends (at least one): after a quiet spell a destination may
send `per_second` at once, then one every `1 / per_second` seconds, so any one second holds
at most `per_second` + its burst of `max(1, per_second)`.
"""

from __future__ import annotations

import json
from datetime import datetime

from core.destinations.registry import ADAPTERS
from core.platform.db import Conn, Database
from core.platform.queries import queries

# A 429 halves the rate a destination sends at; it doubles back every RECOVER seconds
# without another 429, up to the full rate.
RECOVER = 60.0
# The lowest a 429 takes a rate: one send a minute (or the owner's own rate, if lower).
FLOOR = 1 / 60
# The bounds of a rate the owner sets, per second: one every 1,000 s to a thousand.
MIN_RATE = 0.001
MAX_RATE = 1000.0
# Each type's default rate (`Adapter.rate_per_second`), as the statements read it: a
# destination without a rate of its own sends at its type's, if it has one.
TYPE_RATES = json.dumps(
    {name: adapter.rate_per_second for name, adapter in ADAPTERS.items() if adapter.rate_per_second}
)


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
