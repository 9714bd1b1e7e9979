"""Drift: the hourly counts of submissions that missed their form's schema deleted once
older than the drift summary's period (`DRIFT_DAYS`)."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from core.owner.form_schemas import DRIFT_DAYS
from core.ticks.maintenance import PassContext, prune


async def run(ctx: PassContext) -> Counter[str]:
    before = ctx.now - timedelta(days=DRIFT_DAYS)
    return Counter(drift_pruned=await prune(ctx, "prune_schema_drift", before=before))
