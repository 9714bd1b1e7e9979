"""Session sweep: dashboard sessions idle past their limit forgotten (they are refused once
idle already; this deletes them)."""

from __future__ import annotations

from collections import Counter

from core.owner.dashboard_sessions import forget_idle_sessions
from core.ticks.maintenance import PassContext


async def run(ctx: PassContext) -> Counter[str]:
    async with ctx.services.db.connection() as conn:
        return Counter(sessions_forgotten=await forget_idle_sessions(conn, now=ctx.now))
