"""Running a tick from a scheduled cloud invocation, bounded by the time it has left."""

from __future__ import annotations

import asyncio
import time
import warnings
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from core.platform.clock import utcnow
from core.platform.services import Services
from core.ticks.registry import TICKS, run_pass

# Time kept back from the invocation for the last writes and the heartbeat; a short
# invocation keeps back less, but never under a second.
SAFETY_MARGIN_MS = 5_000
# Between passes of a looping invocation, when a pass found nothing to do.
IDLE_PAUSE_SECONDS = 2.0


class LambdaContext(Protocol):
    """The part of the Lambda context a tick reads."""

    def get_remaining_time_in_millis(self) -> int: ...


def sandbox_loop() -> asyncio.AbstractEventLoop:
    """The sandbox's event loop, reused by warm invocations (pools are bound to it)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return asyncio.get_event_loop()


def budget_seconds(context: LambdaContext) -> float:
    """How long a pass may run in what is left of this invocation."""
    remaining = context.get_remaining_time_in_millis()
    margin = min(SAFETY_MARGIN_MS, max(remaining // 2, 1_000))
    return max(remaining - margin, 0) / 1000


def run_scheduled(
    services: Services,
    name: str,
    context: LambdaContext,
    *,
    loop_seconds: float = 0,
    idle_pause: float | None = None,
    cleanup: Callable[[], Awaitable[None]] | None = None,
) -> dict[str, Any]:
    """One pass of the tick `name`; with `loop_seconds`, further passes until that much time
    has gone by or the invocation runs short, `idle_pause` (default IDLE_PAUSE_SECONDS)
    apart when a pass found nothing to do. Returns the counters of every pass, summed."""
    tick = TICKS[name]
    pause = IDLE_PAUSE_SECONDS if idle_pause is None else idle_pause

    async def passes() -> dict[str, Any]:
        started = time.monotonic()
        totals: dict[str, Any] = {"passes": 0}
        try:
            while True:
                budget = budget_seconds(context)
                if budget <= 0:
                    break
                result = await run_pass(services, tick, now=utcnow(), budget=budget)
                totals["passes"] += 1
                for key, value in result.items():
                    if isinstance(value, int | float) and not isinstance(value, bool):
                        totals[key] = totals.get(key, 0) + value
                left = loop_seconds - (time.monotonic() - started)
                if left <= 0 or budget_seconds(context) <= pause:
                    break
                if not any(v for k, v in result.items() if k != "released"):
                    await asyncio.sleep(min(pause, left))
        finally:
            if cleanup is not None:
                await cleanup()
        return totals

    return sandbox_loop().run_until_complete(passes())
