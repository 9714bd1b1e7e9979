"""Quota release: deliveries held while their organization was over quota released once it
is back within its plan; the statement the deliver tick runs first, run here too so an
upgrade or a new month releases them even while no delivery is due."""

from __future__ import annotations

from collections import Counter

from core.outbox import store
from core.ticks.maintenance import PassContext


async def run(ctx: PassContext) -> Counter[str]:
    async with ctx.services.db.connection() as conn:
        return Counter(released=await store.release_held(conn, now=ctx.now))
