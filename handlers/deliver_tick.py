"""The deliver tick function: one bounded outbox pass per scheduled invocation."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Mapping
from typing import Any, Protocol

from core.deliver import close_shared_client
from core.services import Services, utcnow
from core.settings import load_settings
from core.ticks import TICKS, run_pass

# Time kept back from the invocation for the last outcome writes and the heartbeat.
SAFETY_MARGIN_MS = 5_000


class LambdaContext(Protocol):
    def get_remaining_time_in_millis(self) -> int: ...


services = Services.from_settings(load_settings(), pool_max=4)
tick = TICKS["deliver"]


def _event_loop() -> asyncio.AbstractEventLoop:
    """The sandbox's loop, reused by warm invocations (the pool and client are bound to it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return asyncio.get_event_loop()


async def _one_pass(budget: float) -> dict[str, Any]:
    try:
        return dict(await run_pass(services, tick, now=utcnow(), budget=budget))
    finally:
        # Idle keep-alive connections would not outlive the minute until the next trigger.
        await close_shared_client()


def handler(_event: Mapping[str, Any], context: LambdaContext) -> dict[str, Any]:
    budget = max(context.get_remaining_time_in_millis() - SAFETY_MARGIN_MS, 1_000) / 1000
    return _event_loop().run_until_complete(_one_pass(budget))
