"""Session sweep: dashboard sessions idle past their limit forgotten (they are refused once
idle already; this deletes them), and single sign-ons never completed."""

from __future__ import annotations

from collections import Counter

from core.owner.dashboard_sessions import forget_idle_sessions
from core.owner.sso import prune_attempts
from core.ticks.maintenance import PassContext


async def run(ctx: PassContext) -> Counter[str]:
    async with ctx.services.db.connection() as conn:
        return Counter(
            sessions_forgotten=await forget_idle_sessions(conn, now=ctx.now),
            sso_attempts_forgotten=await prune_attempts(conn, now=ctx.now),
        )
