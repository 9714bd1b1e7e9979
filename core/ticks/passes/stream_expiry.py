"""Stream expiry: stream events past `erase_at` erased, in batches of `options.batch`, one
transaction each (docs/streams.md#retention)."""

from __future__ import annotations

import time
from collections import Counter

from core.streams.events import expire_events
from core.ticks.maintenance import PassContext


async def run(ctx: PassContext) -> Counter[str]:
    stats: Counter[str] = Counter()
    while stats["event_expiry_batches"] < ctx.options.max_batches:
        async with ctx.services.db.transaction() as conn:
            erased = await expire_events(conn, now=ctx.now, limit=ctx.options.batch)
        if not erased:
            break
        stats["event_expiry_batches"] += 1
        stats["events_expired"] += erased
        if erased < ctx.options.batch or time.monotonic() > ctx.deadline:
            break
    return stats
