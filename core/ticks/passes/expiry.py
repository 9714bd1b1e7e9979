"""Expiry: submissions past `erase_at` erased, in batches of `options.batch`, one
transaction each (`FOR UPDATE SKIP LOCKED`: passes on several machines take different rows),
by the owner's erase with reason `expired` (`core/submissions/erasure.py`)."""

from __future__ import annotations

import time
from collections import Counter

from core.platform.queries import queries
from core.submissions.erasure import erase_many
from core.ticks.maintenance import PassContext


async def run(ctx: PassContext) -> Counter[str]:
    stats: Counter[str] = Counter()
    while stats["expiry_batches"] < ctx.options.max_batches:
        async with ctx.services.db.transaction() as conn:
            cur = await conn.execute(
                queries["lock_expired_submissions"], {"now": ctx.now, "limit": ctx.options.batch}
            )
            ids = [row["id"] for row in await cur.fetchall()]
            if not ids:
                break
            done = await erase_many(conn, ids=ids, now=ctx.now, reason="expired")
        stats["expiry_batches"] += 1
        stats["expired"] += done.erased
        stats["largest_batch"] = max(stats["largest_batch"], len(ids))
        stats["deliveries_skipped"] += done.skipped_deliveries
        if len(ids) < ctx.options.batch or time.monotonic() > ctx.deadline:
            break
    return stats
