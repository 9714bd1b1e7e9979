"""Adaptive concurrency per destination (docs/delivery.md): a destination that answers
slowly, even successfully, gets fewer sends in flight; one that answers fast again gets its
full limit back, a step per answer. The limit is stored on the destination, where every
worker's claim reads it."""

from __future__ import annotations

import math

from core.outbox import store
from core.platform.db import Database


def send_limit_for(latency: float, *, ceiling: int, slow_send: float) -> int:
    """The sends in flight a destination answering in `latency` seconds may have.

    Answers within `slow_send` keep `ceiling`; slower ones shrink it in proportion (8 at
    1 s becomes 4 at 2 s, 1 from 8 s on), so the time a destination's sends hold the worker
    stays about the same however slowly it answers. Never below one.
    """
    if latency <= slow_send:
        return ceiling
    return max(1, min(ceiling, math.floor(ceiling * slow_send / latency)))


async def adapt(
    db: Database,
    destination_id: str,
    current: int | None,
    *,
    latency: float,
    ceiling: int,
    slow_send: float,
) -> None:
    """After an answer from `destination_id` (a request was made) in `latency` seconds:
    move its stored limit (`current`, as the claim read it; None: `ceiling`) toward what
    that latency allows. Writes only when it differs."""
    target = send_limit_for(latency, ceiling=ceiling, slow_send=slow_send)
    if target == min(current or ceiling, ceiling):
        return
    async with db.connection() as conn:
        await store.adapt_send_limit(conn, destination_id, target=target, ceiling=ceiling)
