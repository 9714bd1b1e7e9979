"""Notices: the owner's notices gathered (dead-delivery alerts opened, quotas reached) and
the due ones folded into notice emails, at most one per kind per hour per organization; the
workers are woken at once to send them (docs/operations.md#owner-notifications)."""

from __future__ import annotations

from collections import Counter

from core.outbox.wakeup import wake_deliveries
from core.owner.notifications import gather, send_due
from core.ticks.maintenance import PassContext


async def run(ctx: PassContext) -> Counter[str]:
    stats: Counter[str] = Counter()
    async with ctx.services.db.connection() as conn:
        stats["notices"] = await gather(conn, now=ctx.now)
    stats["notice_emails"] = await send_due(
        ctx.services.db, now=ctx.now, public_url=str(ctx.services.settings.public_url)
    )
    if stats["notice_emails"]:
        await wake_deliveries(ctx.services)
    return stats
