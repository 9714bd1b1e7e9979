"""Invitations: expired invitations deleted, pending, accepted or withdrawn alike
(docs/teams.md)."""

from __future__ import annotations

from collections import Counter

from core.ticks.maintenance import PassContext, prune


async def run(ctx: PassContext) -> Counter[str]:
    return Counter(invitations_swept=await prune(ctx, "prune_invitations", before=ctx.now))
