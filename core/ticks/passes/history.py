"""History: events, delivery attempts and handled notices older than `HISTORY_DAYS`
deleted, a batch per statement (docs/operations.md#retention)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from core.ticks.maintenance import PassContext, prune

HISTORY_DAYS = 90


async def run(ctx: PassContext) -> Counter[str]:
    start = ctx.now - timedelta(days=HISTORY_DAYS)
    stats: Counter[str] = Counter()
    stats["events_pruned"] = await prune(ctx, "prune_events", before=start)
    stats["attempts_pruned"] = await prune(ctx, "prune_delivery_attempts", before=start)
    stats["notifications_pruned"] = await prune(ctx, "prune_notifications", before=start)
    return stats
