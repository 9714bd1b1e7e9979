"""Heartbeats: a worker's heartbeat forgotten `HEARTBEAT_DAYS` after its last pass (every
process and Lambda sandbox adds one; `/health` counts only recent ones)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from core.ticks.maintenance import PassContext, prune

HEARTBEAT_DAYS = 7


async def run(ctx: PassContext) -> Counter[str]:
    before = ctx.now - timedelta(days=HEARTBEAT_DAYS)
    return Counter(heartbeats_pruned=await prune(ctx, "prune_heartbeats", before=before))
