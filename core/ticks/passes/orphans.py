"""Orphans: stored objects no attachment row refers to (written by a submit whose
transaction never committed), once `ORPHAN_AGE` old, scheduled for deletion; the `files`
pass after it deletes them."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from core.platform.queries import queries
from core.ticks.maintenance import PassContext

ORPHAN_AGE = timedelta(hours=1)


async def run(ctx: PassContext) -> Counter[str]:
    async with ctx.services.db.connection() as conn:
        cur = await conn.execute(
            queries["mark_orphans"], {"now": ctx.now, "older_than": ctx.now - ORPHAN_AGE}
        )
        return Counter(orphans=len(await cur.fetchall()))
