"""The audit trail: each organization's days written to the export bucket when one is
configured (`POSTBAG_AUDIT_EXPORT_URL`), then the rows past the plan's audit retention
forgotten, leaving the chain's anchor (docs/teams.md#the-audit-trail-leaves-the-building)."""

from __future__ import annotations

from collections import Counter

from core.owner.audit_export import export_to_bucket, forget_expired
from core.ticks.maintenance import PassContext


async def export(ctx: PassContext) -> Counter[str]:
    url = ctx.services.settings.audit_export_url
    if url is None:
        return Counter()
    return await export_to_bucket(ctx.services.db, url, now=ctx.now, deadline=ctx.deadline)


async def retention(ctx: PassContext) -> Counter[str]:
    exporting = ctx.services.settings.audit_export_url is not None
    async with ctx.services.db.connection() as conn:
        return Counter(
            audit_rows_forgotten=await forget_expired(conn, now=ctx.now, exporting=exporting)
        )
