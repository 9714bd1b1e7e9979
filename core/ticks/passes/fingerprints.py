"""Fingerprints: the duplicate fingerprints whose window began longer ago than the longest
duplicate window deleted (docs/spam.md#duplicates)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from core.spam.config import MAX_DUPLICATE_WINDOW
from core.ticks.maintenance import PassContext, prune


async def run(ctx: PassContext) -> Counter[str]:
    before = ctx.now - timedelta(seconds=MAX_DUPLICATE_WINDOW)
    pruned = await prune(ctx, "prune_spam_fingerprints", before=before)
    return Counter(spam_fingerprints_pruned=pruned)
