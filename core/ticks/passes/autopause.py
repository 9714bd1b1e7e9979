"""Auto-pause: the destinations that failed every attempt for their window paused
(docs/delivery.md#destinations-that-pause-themselves)."""

from __future__ import annotations

from collections import Counter

from core.outbox.pauses import pause_failing
from core.ticks.maintenance import PassContext


async def run(ctx: PassContext) -> Counter[str]:
    # One transaction: each pause commits with its alert.
    async with ctx.services.db.transaction() as conn:
        return Counter(destinations_paused=await pause_failing(conn, now=ctx.now))
