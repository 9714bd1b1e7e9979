"""Counts: the per-address counts that cap acknowledgement emails and autoresponses (a UTC
day) and password resets (`RESET_WINDOW`) deleted once their day or window is over."""

from __future__ import annotations

from collections import Counter

from core.owner.members import RESET_WINDOW
from core.ticks.maintenance import PassContext, prune


async def run(ctx: PassContext) -> Counter[str]:
    stats: Counter[str] = Counter()
    stats["acknowledgement_counts_pruned"] = await prune(
        ctx, "prune_acknowledgement_counts", before=ctx.now
    )
    stats["autoresponse_counts_pruned"] = await prune(
        ctx, "prune_autoresponse_counts", before=ctx.now
    )
    stats["reset_counts_pruned"] = await prune(
        ctx, "prune_reset_counts", before=ctx.now - RESET_WINDOW
    )
    return stats
