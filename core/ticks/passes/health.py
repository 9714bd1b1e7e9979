"""Health: each live destination's last 24 hours of attempts rolled up into its
`health_stats`, at most every 5 minutes per destination (the statement skips the others)
(docs/scheduled.md#destination-health-housekeeping)."""

from __future__ import annotations

from collections import Counter

from core.platform.queries import queries
from core.ticks.maintenance import PassContext


async def run(ctx: PassContext) -> Counter[str]:
    async with ctx.services.db.connection() as conn:
        cur = await conn.execute(queries["roll_up_destination_health"], {"now": ctx.now})
        return Counter(destinations_rolled_up=cur.rowcount)
